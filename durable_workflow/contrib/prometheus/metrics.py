"""The counters and histograms the engine updates, on prometheus_client's default registry.

Names follow Prometheus conventions: a ``durable_workflow_`` prefix, ``_total`` on
counters, base units (``_seconds``). Labels are type keys, queue names and small
closed sets; never instance or run ids. docs/how-to/metrics.md lists them all.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

#: Workflow task and schedule-to-start durations: milliseconds to a minute.
SHORT_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Activity attempts may run for an hour.
LONG_SECONDS = (*SHORT_SECONDS, 300.0, 900.0, 3600.0)
#: History events fed to a body in one workflow task.
EVENT_COUNTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)

WORKFLOW_STARTED = Counter(
    "durable_workflow_workflow_started_total",
    "Workflow runs started (WorkflowStarted committed), by workflow type.",
    ["workflow_type"],
)
WORKFLOW_CLOSED = Counter(
    "durable_workflow_workflow_closed_total",
    "Workflow runs closed, by workflow type and closing status (completed, failed, "
    "timed_out, cancelled, terminated, continued_as_new).",
    ["workflow_type", "status"],
)
WORKFLOW_TASK_SECONDS = Histogram(
    "durable_workflow_workflow_task_duration_seconds",
    "Time a worker spent on one workflow task (claim, replay, persist, commit), by outcome.",
    ["workflow_type", "outcome"],
    buckets=SHORT_SECONDS,
)
REPLAYED_EVENTS = Histogram(
    "durable_workflow_workflow_task_replayed_events",
    "History events fed to the workflow body in one workflow task: the whole history "
    "on a cold replay, only the new events when the body was warm (sticky hit).",
    ["workflow_type"],
    buckets=EVENT_COUNTS,
)
SCHEDULE_TO_START_SECONDS = Histogram(
    "durable_workflow_task_schedule_to_start_seconds",
    "Time from a task being due to a worker claiming it, by task type and queue.",
    ["task_type", "queue"],
    buckets=SHORT_SECONDS,
)
ACTIVITY_ATTEMPT_SECONDS = Histogram(
    "durable_workflow_activity_attempt_duration_seconds",
    "Time an activity attempt's code ran, by activity type and queue.",
    ["activity_type", "queue"],
    buckets=LONG_SECONDS,
)
ACTIVITY_ATTEMPTS = Counter(
    "durable_workflow_activity_attempts_total",
    "Activity attempts run, by activity type, queue and outcome (completed, failed, async).",
    ["activity_type", "queue", "outcome"],
)
ACTIVITY_FAILED = Counter(
    "durable_workflow_activity_failed_total",
    "Activities that failed for good (after their last retry, non-retryable, timed out), "
    "by activity type, queue and failure category.",
    ["activity_type", "queue", "category"],
)
STICKY_HITS = Counter(
    "durable_workflow_sticky_cache_hits_total",
    "Workflow tasks that resumed a warm body from this process's sticky cache.",
)
STICKY_MISSES = Counter(
    "durable_workflow_sticky_cache_misses_total",
    "Workflow tasks that replayed cold: no warm body here (not_cached) or one that "
    "could not be used (stale).",
    ["reason"],
)
REPAIR_PASSES = Counter(
    "durable_workflow_repair_passes_total",
    "Repair passes run, by outcome (ok, error).",
    ["outcome"],
)
REPAIR_TASKS = Counter(
    "durable_workflow_repair_tasks_total",
    "What repair passes did: leases reclaimed, messages re-sent, timeouts enforced, "
    "stalled bulk jobs re-sent.",
    ["action"],
)
