"""Failed workflow tasks by run, for "open runs stopped on a failed workflow task".

The doctor (and the admin's attention filter) reads the failed workflow tasks that
are their run's latest; without this index that is every failed task of any type (a
year of failed activity attempts) or, as PostgreSQL often chose, a probe per open run
(docs/performance.md, the aged database). Its columns are in other indexes of the table
already, so no update that was HOT stops being one. Built concurrently on PostgreSQL.
"""

from django.db import migrations, models

from durable_workflow.migrations._operations import AddIndexWithoutBlocking


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("durable_workflow", "0025_run_closed_index")]

    operations = [
        AddIndexWithoutBlocking(
            model_name="task",
            index=models.Index(
                fields=["run"],
                condition=models.Q(status="failed", task_type="workflow"),
                name="dw_task_failed_workflow",
            ),
        ),
    ]
