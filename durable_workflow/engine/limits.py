"""Structural limits the body can hit: open operations of a kind, commands in one group.

Exceeding a limit fails the run with a ``structural_limit`` failure; workflow
code cannot catch it. From ``warning_threshold_percent`` of a count limit on (80
by default; 0: never), a warning is logged (:func:`warn_if_near`).
"""

from __future__ import annotations

import dataclasses
from typing import NoReturn

from durable_workflow.engine import failures
from durable_workflow.engine.commands import FailWorkflow
from durable_workflow.engine.operations import OperationTable
from durable_workflow.engine.outbox import Outbox
from durable_workflow.engine.scheduler import Abort
from durable_workflow.exceptions import StructuralLimitExceeded
from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")

#: Structural limits log a warning from this percentage of their ceiling on, unless
#: the executor configures another (``warning_threshold_percent``; 0 turns warnings off).
DEFAULT_WARNING_PERCENT = 80
WARNING_THRESHOLD = "warning_threshold_percent"


def warn_if_near(
    kind: str, current: int, configured: int, *, percent: int, run_id: str, workflow_type: str = ""
) -> None:
    """Log a structured warning when ``current`` reaches ``percent`` % of ``configured``."""
    if not configured or not percent or current * 100 < configured * percent:
        return
    utilization = current * 100 // configured
    logger.warning(
        "run %s approaching structural limit [%s]: %s / %s (%s%% utilization, warning at %s%%)",
        run_id,
        kind,
        current,
        configured,
        utilization,
        percent,
        extra={
            "workflow_run_id": run_id,
            "workflow_type": workflow_type,
            "limit_kind": kind,
            "current": current,
            "limit": configured,
            "utilization_percent": utilization,
        },
    )


#: Which operations each pending-count limit counts.
_COUNTED_KIND = {
    "pending_activity_count": "activity",
    "pending_child_count": "child",
    "pending_timer_count": "timer",
}


class StructuralLimits:
    """The configured limits of one run (``configured`` is set by the executor)."""

    def __init__(self, ops: OperationTable, outbox: Outbox, run_id: str) -> None:
        self._ops = ops
        self._outbox = outbox
        self._run_id = run_id
        #: Limit name -> ceiling (0 or absent: no limit); also the history budget.
        self.configured: dict[str, int] = {}

    def check_pending(self, kind: str, adding: int) -> None:
        """Fail the run if ``adding`` more open operations would pass the ``kind`` limit."""
        configured = self.configured.get(kind, 0)
        if not configured:
            return
        counted = _COUNTED_KIND.get(kind)
        pending = self._ops.open_count(counted) if counted else 0
        if pending + adding > configured:
            self.fail(kind, pending + adding, configured)
        self._warn(kind, pending + adding, configured)

    def check_batch(self, size: int) -> None:
        configured = self.configured.get("command_batch_size", 0)
        if configured and size > configured:
            self.fail("command_batch_size", size, configured)
        self._warn("command_batch_size", size, configured)

    def _warn(self, kind: str, current: int, configured: int) -> None:
        percent = self.configured.get(WARNING_THRESHOLD, DEFAULT_WARNING_PERCENT)
        warn_if_near(kind, current, configured, percent=percent, run_id=self._run_id)

    def fail(self, kind: str, value: int, configured: int) -> NoReturn:
        """Exceeding a structural limit fails the run; user code cannot swallow it."""
        error = StructuralLimitExceeded(kind, value, configured)
        info = failures.describe(error, category="structural_limit")
        details = {
            "structural_limit_kind": kind,
            "structural_limit_value": value,
            "structural_limit_configured": configured,
        }
        self._outbox.close(FailWorkflow(failure=dataclasses.replace(info, details=details)))
        raise Abort()
