"""``WorkflowStub``: the handle application code uses to start and inspect workflows."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

from durable_workflow import clock, registry
from durable_workflow.codec import envelope
from durable_workflow.conf import get_settings
from durable_workflow.description import WorkflowDescription
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.failures import class_path
from durable_workflow.exceptions import (
    CommandRejected,
    QueryFailedError,
    UpdateFailedError,
    UpdateWaitTimedOutError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
    WorkflowParkedError,
)
from durable_workflow.executor import intake, readonly, start_workflow, updates
from durable_workflow.executor.control import request_cancel, request_repair, request_terminate
from durable_workflow.ids import validate_instance_id
from durable_workflow.models import TERMINAL_RUN_STATUSES, RunStatus
from durable_workflow.options import StartOptions
from durable_workflow.results import CommandResult, SignalWithStartResult, StartResult, UpdateResult
from durable_workflow.store import history, runs, waits
from durable_workflow.store import messages as message_store
from durable_workflow.store.messages import UpdateRecord
from durable_workflow.store.records import RunRecord
from durable_workflow.testing.kit import StubTestKit


class WorkflowStub(StubTestKit):
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
        instance = runs.get_instance(validate_instance_id(instance_id))
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
        if result.rejected:
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

    def repair(self, *, reason: str = "") -> CommandResult:
        """Re-create a lost or failed workflow task (e.g. after fixing a determinism bug),
        reclaim the run's expired leases and re-send its ready tasks; ``metadata`` says
        which (``reclaimed_leases``, ``resent_tasks``, ``recreated_workflow_task``)."""
        outcome = request_repair(self._instance_id, reason=reason)
        self.refresh()
        return CommandResult(
            accepted=outcome.accepted,
            outcome=outcome.outcome,
            command_id=str(outcome.command_id),
            instance_id=self._instance_id,
            run_id=self.run_id(),
            rejection_reason=outcome.rejection_reason,
            metadata=dict(outcome.metadata),
            reason=reason or None,
        )

    # -------------------------------------------------------------- messages
    def send_message(
        self,
        stream_key: str,
        payload_reference: str | None = None,
        *,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Put a message on this instance's stream; a repeated idempotency key is a no-op."""
        from durable_workflow.executor.streams import external_send

        return external_send(
            self._instance_id,
            stream_key,
            {
                "payload_reference": payload_reference,
                "correlation_id": correlation_id,
                "idempotency_key": idempotency_key,
                "metadata": metadata or {},
            },
        )

    # ----------------------------------------------------- cancel / terminate
    def attempt_cancel(self, reason: str | None = None) -> CommandResult:
        """Ask the run to stop; the body sees ``WorkflowCancelled`` at its next step."""
        outcome = request_cancel(self._instance_id, run_id=self._target_run(), reason=reason)
        self.refresh()
        return _command_result(outcome, self._pinned)

    def cancel(self, reason: str | None = None) -> CommandResult:
        """``attempt_cancel`` that raises ``CommandRejected`` when the command is rejected."""
        return _raise_if_rejected(self.attempt_cancel(reason), "cancel")

    def attempt_terminate(self, reason: str | None = None) -> CommandResult:
        """Close the run at once; no more workflow code runs."""
        outcome = request_terminate(self._instance_id, run_id=self._target_run(), reason=reason)
        self.refresh()
        return _command_result(outcome, self._pinned)

    def terminate(self, reason: str | None = None) -> CommandResult:
        """``attempt_terminate`` that raises ``CommandRejected`` when the command is rejected."""
        return _raise_if_rejected(self.attempt_terminate(reason), "terminate")

    # -------------------------------------------------------------- signals
    def _target_run(self) -> str | None:
        return self.run_id() if self._pinned else None

    def attempt_signal(self, name: str, *args: Any) -> CommandResult:
        """Send a signal; the result says whether it was accepted and why not."""
        return self.attempt_signal_with_arguments(name, list(args))

    def attempt_signal_with_arguments(
        self, name: str, arguments: list[Any] | dict[str, Any]
    ) -> CommandResult:
        """Send a signal with a positional list or a named map of arguments."""
        outcome = intake.send_signal(self._instance_id, name, arguments, run_id=self._target_run())
        return _command_result(outcome, self._pinned)

    def signal(self, name: str, *args: Any) -> CommandResult:
        """Send a signal; raises ``CommandRejected`` if it is rejected."""
        return _raise_if_rejected(self.attempt_signal(name, *args), f"signal {name!r}")

    def signal_with_start(
        self,
        name: str,
        *signal_args: Any,
        start_args: list[Any] | None = None,
        options: StartOptions | None = None,
    ) -> SignalWithStartResult:
        """Start the workflow if no run is active, and signal it, atomically."""
        workflow_cls = _class_or_none(self._workflow_type)
        outcome = intake.signal_with_start(
            instance_id=self._instance_id,
            workflow_type=self._workflow_type,
            workflow_class=class_path(workflow_cls) if workflow_cls else "",
            signal_name=name,
            signal_arguments=list(signal_args),
            start_arguments=list(start_args or []),
            options=options or StartOptions(),
            queue=getattr(workflow_cls, "queue", None),
            connection=getattr(workflow_cls, "connection", None),
        )
        self.refresh()
        start = outcome.start
        return SignalWithStartResult(
            start=None
            if start is None
            else StartResult(
                accepted=start.accepted,
                outcome=start.outcome,
                command_id=str(start.command_id),
                instance_id=start.instance_id,
                run_id=str(start.run_id) if start.run_id else None,
                rejection_reason=start.rejection_reason,
            ),
            signal=_command_result(outcome.signal, False),
        )

    # -------------------------------------------------------------- queries
    def query(self, name: str, *args: Any) -> Any:
        """Ask the workflow's state through a ``@dw.query`` method (durable or method name)."""
        return self.query_with_arguments(name, list(args))

    def query_with_arguments(self, name: str, arguments: list[Any] | dict[str, Any]) -> Any:
        run = self._run if self._pinned else runs.current_run(self._instance_id)
        if run is None:
            raise QueryFailedError(
                "rejected_not_started", f"workflow {self._instance_id!r} has not started"
            )
        return readonly.run_query(run, name, arguments)[1]

    # -------------------------------------------------------------- updates
    def submit_update(self, name: str, *args: Any) -> UpdateResult:
        """Record the update and return as soon as it is accepted (or rejected)."""
        outcome = updates.submit_update(
            self._instance_id, name, list(args), run_id=self._target_run()
        )
        return _update_result(outcome.record, outcome)

    def attempt_update(
        self, name: str, *args: Any, wait_timeout: float | None = None
    ) -> UpdateResult:
        """Submit the update and wait (bounded) for the workflow to apply it."""
        return self.attempt_update_with_arguments(name, list(args), wait_timeout=wait_timeout)

    def attempt_update_with_arguments(
        self, name: str, arguments: list[Any] | dict[str, Any], *, wait_timeout: float | None = None
    ) -> UpdateResult:
        outcome = updates.submit_update(
            self._instance_id, name, arguments, run_id=self._target_run()
        )
        result = _update_result(outcome.record, outcome)
        if not result.accepted or result.update_id is None:
            return result
        settings = get_settings()
        budget = settings.UPDATE_WAIT_TIMEOUT_SECONDS if wait_timeout is None else wait_timeout
        deadline = time.monotonic() + budget
        while True:
            latest = self.inspect_update(result.update_id)
            if latest.update_status != "accepted":
                return latest
            if time.monotonic() >= deadline:
                return dataclasses.replace(latest, wait_timed_out=True)
            time.sleep(settings.UPDATE_POLL_INTERVAL_MS / 1000)

    def update(self, name: str, *args: Any, wait_timeout: float | None = None) -> Any:
        """Run an update and return its result; raises if it is rejected, fails or times out."""
        result = self.attempt_update(name, *args, wait_timeout=wait_timeout)
        if result.rejected:
            raise CommandRejected(
                result.outcome or "rejected",
                result.rejection_reason,
                f"update {name!r} was rejected: {result.failure_message or result.outcome}",
                **result.metadata,
            )
        if result.failed:
            raise UpdateFailedError(f"update {name!r} failed: {result.failure_message}")
        if result.wait_timed_out:
            raise UpdateWaitTimedOutError(f"update {name!r} was accepted but has not finished yet")
        return result.result

    def inspect_update(self, update_id: str) -> UpdateResult:
        """The stored lifecycle of an update; never waits."""
        record = message_store.get_update(update_id)
        if record is None or record.instance_id != self._instance_id:
            raise WorkflowNotFoundError(f"no update {update_id!r} for {self._instance_id!r}")
        return _update_result(record, None)

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

    def describe(self) -> WorkflowDescription:
        """The run now: its status, what it waits on and, when it is parked on a failed
        workflow task, that failure (read from committed rows, nothing is replayed)."""
        return waits.describe(self._instance_id, self._workflow_type, self.refresh()._run)

    def wait(self, timeout: float = 30.0, *, poll_interval: float = 0.05) -> WorkflowStub:
        """Block until the run closes (or ``timeout`` seconds pass); for scripts and tests.

        Raises ``WorkflowParkedError`` as soon as the run is parked on a failed
        workflow task: it would not close by itself.
        """
        deadline = time.monotonic() + timeout
        while self.refresh().running():
            self._raise_if_parked()
            if time.monotonic() >= deadline:
                break
            time.sleep(poll_interval)
        return self

    def _raise_if_parked(self) -> None:
        """``WorkflowParkedError`` when the run (as last read) is open and parked."""
        run = self._run
        failure = None if run is None or not self.running() else waits.task_failure_of(run.id)
        if run is not None and failure is not None:
            raise WorkflowParkedError(
                instance_id=self._instance_id,
                run_id=str(run.id),
                exception_type=failure.exception_type,
                message=failure.message,
                traceback=failure.traceback,
                since=failure.since,
            )


def _command_result(outcome: Any, pinned: bool) -> CommandResult:
    return CommandResult(
        accepted=outcome.accepted,
        outcome=outcome.outcome,
        command_id=str(outcome.command_id),
        instance_id=outcome.instance_id,
        run_id=str(outcome.run_id) if outcome.run_id else None,
        rejection_reason=outcome.rejection_reason,
        metadata=dict(outcome.metadata),
        target_scope="run" if pinned else "instance",
        reason=getattr(outcome, "reason", None),
    )


def _raise_if_rejected(result: CommandResult, what: str) -> CommandResult:
    if result.rejected:
        raise CommandRejected(
            result.outcome,
            result.rejection_reason,
            f"{what} was rejected: {result.rejection_reason or result.outcome}",
            **result.metadata,
        )
    return result


def _update_result(record: UpdateRecord | None, outcome: Any) -> UpdateResult:
    if record is None:
        return UpdateResult(
            accepted=False,
            update_status="rejected",
            update_id=None,
            update_name="",
            command_id=str(outcome.command_id),
            rejection_reason=outcome.rejection_reason,
            outcome=outcome.outcome,
            metadata=dict(outcome.metadata),
        )
    status = record.status
    value = None
    if status == "completed" and record.result is not None:
        value = envelope.decode(record.result)
    closed_outcome = {"completed": "update_completed", "failed": "update_failed"}
    return UpdateResult(
        accepted=status != "rejected",
        update_status=status,
        update_id=str(record.id),
        update_name=record.update_name,
        command_id=str(record.command_id),
        result=value,
        failure_message=record.failure_message or None,
        rejection_reason=record.rejection_reason,
        outcome=outcome.outcome
        if outcome is not None and outcome.outcome
        else closed_outcome.get(status),
        closed_at=record.closed_at,
        metadata=dict(outcome.metadata) if outcome is not None else {},
    )


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
