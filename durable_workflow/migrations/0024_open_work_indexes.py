"""Indexes for a database that has lived: open runs, open activity executions, and runs
newest first.

Measured on a seeded database of 1,000,000 closed and 100,000 open runs (benchmarks
scenario ``aged``, docs/performance.md): the repair pass read every activity execution
four times (one scan per timeout kind), and the repair pass and the doctor every run,
to find the few that are open or have a deadline; ``list_runs`` by a search attribute that a fifth of the runs carry sorted all
of them to return a page. Partial indexes hold only the open rows, so they stay small
however many closed ones accumulate. Built concurrently on PostgreSQL.
"""

from django.db import migrations, models

from durable_workflow.migrations._operations import AddIndexWithoutBlocking

TERMINAL = ["cancelled", "completed", "failed", "terminated"]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("durable_workflow", "0023_refuted_expectation")]

    operations = [
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                fields=["created_at"], condition=~models.Q(status__in=TERMINAL), name="dw_run_open"
            ),
        ),
        *(
            AddIndexWithoutBlocking(
                model_name="workflowrun",
                index=models.Index(
                    fields=[field],
                    condition=models.Q(**{f"{field}__isnull": False})
                    & ~models.Q(status__in=TERMINAL),
                    name=name,
                ),
            )
            for field, name in (
                ("execution_deadline_at", "dw_run_open_execution_deadline"),
                ("run_deadline_at", "dw_run_open_run_deadline"),
            )
        ),
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(fields=["started_at", "id"], name="dw_run_started"),
        ),
        AddIndexWithoutBlocking(
            model_name="activityexecution",
            index=models.Index(
                fields=["status"],
                condition=models.Q(status__in=["pending", "running"]),
                name="dw_activity_open",
            ),
        ),
    ]
