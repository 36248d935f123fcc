"""``WorkflowStub``: the handle application code uses to start and inspect workflows."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

from durable_workflow import clock, registry
from durable_workflow.codec import envelope
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.failures import class_path
from durable_workflow.exceptions import (
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
)
from durable_workflow.executor import start_workflow
from durable_workflow.executor.control import CommandOutcome, request_repair
from durable_workflow.ids import validate_instance_id
from durable_workflow.models import TERMINAL_RUN_STATUSES, RunStatus
from durable_workflow.options import StartOptions
from durable_workflow.store import history, runs
from durable_workflow.store.records import RunRecord


@dataclasses.dataclass(frozen=True)
class StartResult:
    """What happened to a start command."""

    accepted: bool
    outcome: str
    command_id: str
    instance_id: str
    run_id: str | None
    rejection_reason: str | None = None

    def rejected(self) -> bool:
        return not self.accepted


class WorkflowStub:
    """A handle on one workflow instance (and, after ``load_run``, one pinned run)."""

    def __init__(
        self,
        instance_id: str,
        workflow_type: str,
        *,
        run: RunRecord | None = None,
        pinned: bool = False,
    ) -> None:
        self._instance_id = instance_id
        self._workflow_type = workflow_type
        self._run = run
        self._pinned = pinned

    def __repr__(self) -> str:
        return f"<WorkflowStub {self._workflow_type} {self._instance_id} {self.status()}>"

    # ------------------------------------------------------------ factories
    @classmethod
    def make(cls, workflow: type | str, instance_id: str | None = None) -> WorkflowStub:
        """A stub for a new instance; the id is reserved at once (status ``reserved``)."""
        workflow_type = _type_key(workflow)
        registry.workflow_class(workflow_type)  # an unknown type key fails here, clearly
        instance_id = uuid.uuid4().hex if instance_id is None else validate_instance_id(instance_id)
        runs.reserve_instance(instance_id, workflow_type, now=clock.now())
        return cls(instance_id, workflow_type, run=runs.current_run(instance_id))

    @classmethod
    def load(cls, instance_id: str) -> WorkflowStub:
        """A stub for an existing instance that follows its newest run."""
        instance = runs.get_instance(instance_id)
        if instance is None:
            raise WorkflowNotFoundError(f"no workflow instance {instance_id!r}")
        return cls(instance_id, instance.workflow_type, run=runs.current_run(instance_id))

    @classmethod
    def load_run(cls, run_id: str | uuid.UUID) -> WorkflowStub:
        """A stub pinned to one run, current or historical."""
        try:
            run = runs.get_run(uuid.UUID(str(run_id)))
        except ValueError:
            run = None
        if run is None:
            raise WorkflowNotFoundError(f"no workflow run {run_id!r}")
        return cls(run.instance_id, run.workflow_type, run=run, pinned=True)

    # ------------------------------------------------------------- commands
    def start(self, *args: Any, options: StartOptions | None = None) -> StartResult:
        """Start the workflow; raises ``WorkflowAlreadyStartedError`` when rejected."""
        result = self.attempt_start(*args, options=options)
        if result.rejected():
            raise WorkflowAlreadyStartedError(
                result.outcome,
                result.rejection_reason,
                f"workflow {self._instance_id!r} was already started",
                command_id=result.command_id,
            )
        return result

    def attempt_start(self, *args: Any, options: StartOptions | None = None) -> StartResult:
        """Start the workflow and report the outcome instead of raising on rejection."""
        if options is None and args and isinstance(args[-1], StartOptions):
            options, args = args[-1], args[:-1]
        workflow_cls = _class_or_none(self._workflow_type)
        outcome = start_workflow(
            instance_id=self._instance_id,
            workflow_type=self._workflow_type,
            workflow_class=class_path(workflow_cls) if workflow_cls else "",
            arguments=list(args),
            options=options or StartOptions(),
            queue=getattr(workflow_cls, "queue", None),
            connection=getattr(workflow_cls, "connection", None),
        )
        self.refresh()
        return StartResult(
            accepted=outcome.accepted,
            outcome=outcome.outcome,
            command_id=str(outcome.command_id),
            instance_id=outcome.instance_id,
            run_id=str(outcome.run_id) if outcome.run_id else None,
            rejection_reason=outcome.rejection_reason,
        )

    def repair(self, *, reason: str = "") -> CommandOutcome:
        """Re-create a lost or failed workflow task (e.g. after fixing a determinism bug)."""
        outcome = request_repair(self._instance_id, reason=reason)
        self.refresh()
        return outcome

    # ---------------------------------------------------------------- state
    def refresh(self) -> WorkflowStub:
        """Re-read the run from the database (status and output are cached until then)."""
        if self._pinned and self._run is not None:
            self._run = runs.get_run(self._run.id)
        else:
            self._run = runs.current_run(self._instance_id)
        return self

    def id(self) -> str:
        return self._instance_id

    def run_id(self) -> str | None:
        return str(self._run.id) if self._run else None

    def workflow_type(self) -> str:
        return self._workflow_type

    def status(self) -> str:
        return self._run.status if self._run else "reserved"

    def closed_reason(self) -> str | None:
        return self._run.closed_reason if self._run else None

    def running(self) -> bool:
        return self._run is not None and self._run.status not in TERMINAL_RUN_STATUSES

    def completed(self) -> bool:
        return self.status() == RunStatus.COMPLETED

    def failed(self) -> bool:
        return self.status() == RunStatus.FAILED

    def cancelled(self) -> bool:
        return self.status() == RunStatus.CANCELLED

    def terminated(self) -> bool:
        return self.status() == RunStatus.TERMINATED

    def output(self) -> Any:
        """The decoded return value of a completed run (``None`` otherwise)."""
        if self._run is None or self._run.output is None:
            return None
        return envelope.decode(self._run.output, expected_codec=self._run.payload_codec)

    def history(self) -> list[HistoryEvent]:
        """The run's history events, in order."""
        if self._run is None:
            return []
        return history.load_history(self._run.id)

    def wait(self, timeout: float = 30.0, *, poll_interval: float = 0.05) -> WorkflowStub:
        """Block until the run closes (or ``timeout`` seconds pass); for scripts and tests."""
        deadline = time.monotonic() + timeout
        while self.refresh().running() and time.monotonic() < deadline:
            time.sleep(poll_interval)
        return self


def _type_key(workflow: type | str) -> str:
    if isinstance(workflow, str):
        if not workflow.strip():
            raise ValueError("a workflow type key cannot be empty")
        return workflow
    key = getattr(workflow, "type_key", None)
    if not isinstance(workflow, type) or not key:
        raise TypeError(f"expected a Workflow subclass or a type key, not {workflow!r}")
    return str(key)


def _class_or_none(type_key: str) -> type | None:
    try:
        return registry.workflow_class(type_key)
    except LookupError:
        return None
