"""History events get an index on (run, event_type, sequence).

A run's timeline filtered by event type (the admin's ``?event_type=``) walked every
event of the run through the (run, sequence) index and dropped the other types; the
new index finds the matching events in order.

On PostgreSQL the index is built with ``CREATE INDEX CONCURRENTLY`` (so this migration
is not atomic): writers are not blocked while a history table of tens of millions of
rows is indexed, which takes minutes. Elsewhere, a plain ``CREATE INDEX``.
"""

from typing import Any

from django.db import migrations, models

INDEX = models.Index(fields=["run", "event_type", "sequence"], name="dw_history_run_type")


class AddIndexWithoutBlocking(migrations.AddIndex):
    """``AddIndex``, concurrently on PostgreSQL (the state change is the same)."""

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


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("durable_workflow", "0020_fewer_index_entries")]

    operations = [AddIndexWithoutBlocking(model_name="historyevent", index=INDEX)]
