"""The Celery app of the suite's workers, configured as docs/how-to/deploying-workers.md
recommends (prefetch 1, reused database connections).

``DW_CHAOS_CLOCK_OFFSET`` (seconds, may be negative) makes this process's machine clock
wrong (``durable_workflow.clock.skew_system_clock``): a worker on a host whose clock runs
ahead or behind, faked in-process. (Not ``clock.advance``: that is a test's deliberate
move of the engine's own time, which no engine could second-guess.)
``DW_CHAOS_BEAT=1`` adds the repair entry for ``celery beat``.
"""

from __future__ import annotations

import datetime as dt
import os

from celery import Celery

from benchmarks import readiness  # noqa: F401  (the ready file the harness waits for)
from durable_workflow import clock
from reliability import config

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reliability.settings")

_offset = float(os.environ.get("DW_CHAOS_CLOCK_OFFSET") or 0)
if _offset:
    clock.skew_system_clock(dt.timedelta(seconds=_offset))

app = Celery("durable_workflow_reliability")
app.conf.update(
    broker_url=config.BROKER_URL,
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    CELERY_DB_REUSE_MAX=1000,
)
app.autodiscover_tasks(["durable_workflow"])

if os.environ.get("DW_CHAOS_BEAT"):

    @app.on_after_configure.connect
    def _repair_entry(sender: Celery, **_: object) -> None:
        # As docs/quickstart.md does it: imported once Django's settings are usable.
        from durable_workflow.transport.celery import beat_schedule

        sender.conf.beat_schedule = {**sender.conf.beat_schedule, **beat_schedule()}
