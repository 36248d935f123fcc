"""Operations the engine's migrations share (the loader skips modules named ``_*``)."""

from typing import Any

from django.db import migrations


class AddIndexWithoutBlocking(migrations.AddIndex):
    """``AddIndex``, with ``CREATE INDEX CONCURRENTLY`` on PostgreSQL: writers go on
    while a large table is indexed. The migration using it must set ``atomic = False``.
    The state change is ``AddIndex``'s, so ``makemigrations`` sees nothing to do."""

    def database_forwards(self, app_label: str, editor: Any, from_state: Any, to_state: Any):  # type: ignore[no-untyped-def]
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(editor.connection.alias, model):
            if editor.connection.vendor == "postgresql":
                editor.add_index(model, self.index, concurrently=True)
            else:
                editor.add_index(model, self.index)

    def database_backwards(self, app_label: str, editor: Any, from_state: Any, to_state: Any):  # type: ignore[no-untyped-def]
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(editor.connection.alias, model):
            if editor.connection.vendor == "postgresql":
                editor.remove_index(model, self.index, concurrently=True)
            else:
                editor.remove_index(model, self.index)
