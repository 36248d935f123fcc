"""Closed runs by ``(closed_at, id)``, for ``workflow_prune``.

Each batch of the prune asks for the oldest closed runs past retention; without an
index on ``closed_at`` that is a scan of every run per batch (on 330,000 runs, 77,000
pages and a quarter of a second for each 500 runs: docs/performance.md, prune). Open
runs have no ``closed_at`` and stay out of it. Built concurrently on PostgreSQL.
"""

from django.db import migrations, models

from durable_workflow.migrations._operations import AddIndexWithoutBlocking


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("durable_workflow", "0024_open_work_indexes")]

    operations = [
        AddIndexWithoutBlocking(
            model_name="workflowrun",
            index=models.Index(
                fields=["closed_at", "id"],
                condition=models.Q(closed_at__isnull=False),
                name="dw_run_closed",
            ),
        ),
    ]
