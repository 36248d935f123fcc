"""The Celery side of schedules: the tick task and its beat entry.

The task name is persisted in brokers and beat schedules: never rename it.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from durable_workflow.conf import get_settings

SCHEDULE_TICK_TASK = "durable_workflow.schedule_tick"
DEFAULT_TICK_INTERVAL_SECONDS = 10.0


def tick_interval() -> float:
    value = getattr(get_settings(), "SCHEDULE_TICK_INTERVAL_SECONDS", None)
    return float(value or DEFAULT_TICK_INTERVAL_SECONDS)


def schedule_beat_entry() -> dict[str, dict[str, Any]]:
    """An entry for ``app.conf.beat_schedule`` that runs the schedule tick."""
    interval = tick_interval()
    return {
        "durable-workflow-schedule-tick": {
            "task": SCHEDULE_TICK_TASK,
            "schedule": interval,
            # A tick that waited in the queue past the next one is redundant.
            "options": {"expires": interval * 2},
        }
    }


@shared_task(name=SCHEDULE_TICK_TASK, ignore_result=True)
def schedule_tick() -> dict[str, Any]:
    from durable_workflow.schedules.ticker import tick

    report = tick()
    outcomes: dict[str, int] = {}
    for row in report.results:
        outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1
    return {"lock_acquired": report.lock_acquired, "outcomes": outcomes}
