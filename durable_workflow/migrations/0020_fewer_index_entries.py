# The physical floor (docs/performance.md): foreign keys whose lookups an index that
# leads with the same column already serves lose their own index, and the nullable ones
# are indexed only where set. Every index is one more entry for each row written.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
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
        migrations.AddIndex(
            model_name="activityexecution",
            index=models.Index(
                condition=models.Q(("worker_session_id__isnull", False)),
                fields=["worker_session_id"],
                name="dw_activity_session",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("timer__isnull", False)), fields=["timer"], name="dw_task_timer"
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("activity_execution__isnull", False)),
                fields=["activity_execution"],
                name="dw_task_activity",
            ),
        ),
    ]
