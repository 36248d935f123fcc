"""How the engine's reports (``durable_workflow.observe``) update the metrics.

Facts that a transaction records (a run started or closed, an activity failed for
good) are counted once it commits, so a rolled-back attempt counts nothing; what a
worker did (a task's duration, an attempt's run, a cache answer) is counted at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable_workflow.contrib.prometheus import metrics
from durable_workflow.observe import Recorder
from durable_workflow.store import database
from durable_workflow.transport.celery import effective_queue

#: History events that close a run -> the ``status`` label.
CLOSING = {
    "WorkflowCompleted": "completed",
    "WorkflowFailed": "failed",
    "WorkflowTimedOut": "timed_out",
    "WorkflowCancelled": "cancelled",
    "WorkflowTerminated": "terminated",
    "WorkflowContinuedAsNew": "continued_as_new",
}


def queue_label(queue: str | None, connection: str | None, task_type: str) -> str:
    """The queue the task's message goes to, as the database gauges name it."""
    try:
        return effective_queue(queue, connection, task_type)
    except Exception:  # an unloadable connection still deserves a label
        return queue or "default"


class PrometheusRecorder(Recorder):
    def history_appended(self, run: Any, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        started = closed = None
        for kind, _ in events:
            if kind == "WorkflowStarted":
                started = True
            elif kind in CLOSING:
                closed = CLOSING[kind]
        if started is None and closed is None:
            return
        workflow_type = run.workflow_type

        def count() -> None:
            if started:
                metrics.WORKFLOW_STARTED.labels(workflow_type).inc()
            if closed:
                metrics.WORKFLOW_CLOSED.labels(workflow_type, closed).inc()

        database.on_commit(count, robust=True)

    def workflow_task(self, workflow_type: str, outcome: str, seconds: float) -> None:
        metrics.WORKFLOW_TASK_SECONDS.labels(workflow_type, outcome).observe(seconds)

    def replayed(self, workflow_type: str, events: int) -> None:
        metrics.REPLAYED_EVENTS.labels(workflow_type).observe(events)

    def task_started(
        self, task_type: str, queue: str | None, connection: str | None, seconds: float
    ) -> None:
        label = queue_label(queue, connection, task_type)
        metrics.SCHEDULE_TO_START_SECONDS.labels(task_type, label).observe(seconds)

    def activity_attempt(self, execution: Any, outcome: str, seconds: float) -> None:
        queue = queue_label(execution.queue, execution.connection, "activity")
        metrics.ACTIVITY_ATTEMPTS.labels(execution.activity_type, queue, outcome).inc()
        metrics.ACTIVITY_ATTEMPT_SECONDS.labels(execution.activity_type, queue).observe(seconds)

    def activity_failed(self, execution: Any, category: str) -> None:
        labels = (
            execution.activity_type,
            queue_label(execution.queue, execution.connection, "activity"),
            category or "unknown",
        )
        database.on_commit(lambda: metrics.ACTIVITY_FAILED.labels(*labels).inc(), robust=True)

    def sticky(self, outcome: str) -> None:
        if outcome == "hit":
            metrics.STICKY_HITS.inc()
        else:
            metrics.STICKY_MISSES.labels(outcome).inc()

    def repair_pass(self, report: Any) -> None:
        if report is None:
            metrics.REPAIR_PASSES.labels("error").inc()
            return
        metrics.REPAIR_PASSES.labels("ok").inc()
        for action, count in report.as_dict().items():
            metrics.REPAIR_TASKS.labels(action).inc(count)


#: The one recorder (the metrics it updates are process-wide anyway).
RECORDER = PrometheusRecorder()
