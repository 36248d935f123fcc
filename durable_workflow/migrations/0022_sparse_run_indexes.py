# The physical floor (docs/performance.md): a run update that is not HOT (its status
# changed) adds an entry to every index of the run table; the mostly empty lineage keys
# and the business key are indexed only where set (an equality lookup implies NOT NULL).

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


class AddIndexWithoutBlocking(migrations.AddIndex):
    """``AddIndex``, built concurrently on PostgreSQL so writers are not blocked while a
    large table is indexed (the state change is the same)."""

    def database_forwards(self, app_label: str, editor: Any, from_state: Any, to_state: Any):  # type: ignore[no-untyped-def]
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(editor.connection.alias, model):
            concurrently = editor.connection.vendor == "postgresql"
            editor.add_index(model, self.index, **({"concurrently": True} if concurrently else {}))

    def database_backwards(self, app_label: str, editor: Any, from_state: Any, to_state: Any):  # type: ignore[no-untyped-def]
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(editor.connection.alias, model):
            concurrently = editor.connection.vendor == "postgresql"
            editor.remove_index(
                model, self.index, **({"concurrently": True} if concurrently else {})
            )


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction
    dependencies = [
        ("durable_workflow", "0021_history_run_event_type"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="workflowrun",
            name="dw_run_business_key",
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="continued_from",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="continued_as",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="parent_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="child_runs",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="reset_from_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="reset_to_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="durable_workflow.workflowrun",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("business_key__isnull", False)),
                fields=["business_key"],
                name="dw_run_business_key",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("parent_run__isnull", False)),
                fields=["parent_run"],
                name="dw_run_parent",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("continued_from__isnull", False)),
                fields=["continued_from"],
                name="dw_run_continued_from",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("reset_from_run__isnull", False)),
                fields=["reset_from_run"],
                name="dw_run_reset_from",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("reset_to_run__isnull", False)),
                fields=["reset_to_run"],
                name="dw_run_reset_to",
            ),
        ),
    ]
