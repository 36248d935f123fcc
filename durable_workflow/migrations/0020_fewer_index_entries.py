# The physical floor (docs/performance.md): foreign keys whose lookups an index that
# leads with the same column already serves lose their own index, and the nullable ones
# are indexed only where set. Every index is one more entry for each row written.

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
        ("durable_workflow", "0019_namespaces"),
    ]

    operations = [
        migrations.AlterField(
            model_name="activityattempt",
            name="execution",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="attempts",
                to="durable_workflow.activityexecution",
            ),
        ),
        migrations.AlterField(
            model_name="activityexecution",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="activity_executions",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="activityexecution",
            name="worker_session_id",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AlterField(
            model_name="historyevent",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="history",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="activity_execution",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="tasks",
                to="durable_workflow.activityexecution",
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="tasks",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="timer",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="tasks",
                to="durable_workflow.timer",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="activityexecution",
            index=models.Index(
                condition=models.Q(("worker_session_id__isnull", False)),
                fields=["worker_session_id"],
                name="dw_activity_session",
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="task",
            index=models.Index(
                condition=models.Q(("timer__isnull", False)), fields=["timer"], name="dw_task_timer"
            ),
        ),
        AddIndexWithoutBlocking(
            model_name="task",
            index=models.Index(
                condition=models.Q(("activity_execution__isnull", False)),
                fields=["activity_execution"],
                name="dw_task_activity",
            ),
        ),
    ]
