"""The engine's metric points: one call where it already logs, counts or announces.

The executor calls these functions where something worth counting happens (a
workflow task ends, an activity attempt returns, history is appended, the sticky
cache answers, a repair pass ends). Each forwards to the recorder the settings
choose: :class:`Recorder`, which does nothing, unless ``PROMETHEUS_METRICS`` is on
(then :class:`durable_workflow.contrib.prometheus.recorder.PrometheusRecorder`,
imported only then). Durations are measured by the caller with the monotonic clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable_workflow.conf import Settings, get_settings
from durable_workflow.exceptions import ConfigurationError


class Recorder:
    """What the engine reports; this base ignores it all (metrics off)."""

    def history_appended(self, run: Any, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Events appended to ``run``'s history in the current transaction."""

    def workflow_task(self, workflow_type: str, outcome: str, seconds: float) -> None:
        """A workflow task ended (``outcome`` as ``run_workflow_task`` returns it)."""

    def replayed(self, workflow_type: str, events: int) -> None:
        """A workflow task fed ``events`` history events to the body."""

    def task_started(
        self, task_type: str, queue: str | None, connection: str | None, seconds: float
    ) -> None:
        """A task was claimed ``seconds`` after it was due."""

    def activity_attempt(self, execution: Any, outcome: str, seconds: float) -> None:
        """An activity attempt's user code returned (``completed``, ``failed``, ``async``)."""

    def activity_failed(self, execution: Any, category: str) -> None:
        """An activity failed for good (recorded in the current transaction)."""

    def sticky(self, outcome: str) -> None:
        """The sticky cache answered: ``hit``, ``not_cached`` or ``stale``."""

    def repair_pass(self, report: Any) -> None:
        """A repair pass ended with ``report`` (``None``: it raised)."""


_NULL = Recorder()
_chosen: dict[str, Any] = {"settings": None, "recorder": _NULL}


def recorder() -> Recorder:
    """The recorder for the current settings (chosen again when they change)."""
    settings = get_settings()
    if settings is not _chosen["settings"]:
        _chosen["recorder"] = _choose(settings)
        _chosen["settings"] = settings
    chosen: Recorder = _chosen["recorder"]
    return chosen


def _choose(settings: Settings) -> Recorder:
    if not settings.PROMETHEUS_METRICS:
        return _NULL
    try:
        from durable_workflow.contrib.prometheus.recorder import RECORDER
    except ImportError as exc:  # get_settings() checks too; a broken install ends here
        raise ConfigurationError(
            "DURABLE_WORKFLOW['PROMETHEUS_METRICS'] needs prometheus-client: "
            "pip install 'durable-workflow[prometheus]'"
        ) from exc
    return RECORDER


def history_appended(run: Any, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
    recorder().history_appended(run, events)


def workflow_task(workflow_type: str | None, outcome: str, seconds: float) -> None:
    if workflow_type:  # a task that was gone before its run was read is about no workflow
        recorder().workflow_task(workflow_type, outcome, seconds)


def replayed(workflow_type: str, events: int) -> None:
    recorder().replayed(workflow_type, events)


def task_started(task_type: str, queue: str | None, connection: str | None, seconds: float) -> None:
    recorder().task_started(task_type, queue, connection, max(seconds, 0.0))


def activity_attempt(execution: Any, outcome: str, seconds: float) -> None:
    recorder().activity_attempt(execution, outcome, seconds)


def activity_failed(execution: Any, category: str) -> None:
    recorder().activity_failed(execution, category)


def sticky(outcome: str) -> None:
    recorder().sticky(outcome)


def repair_pass(report: Any) -> None:
    recorder().repair_pass(report)
