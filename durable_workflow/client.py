"""``WorkflowStub``: the handle application code uses to start and inspect workflows.

``WorkflowStub.make(OrderWorkflow)`` is a ``WorkflowStub[P, R]`` for type checkers:
``start()`` checks its arguments against ``OrderWorkflow.handle`` (``P``) and
``result()`` returns its declared type (``R``). Signals, queries and updates are
in ``client_messages``; what the stub read of its run (status, output) in
``client_state``; ``result()``'s errors in ``client_results``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import uuid
from typing import Any, Generic, overload

from durable_workflow import clock, interceptors, namespaces, registry
from durable_workflow.authoring.protocols import Handles, P, R
from durable_workflow.client_async import call, pause, twin
from durable_workflow.client_messages import StubMessages, plain, workflow_class_or_none
from durable_workflow.client_results import (
    closed_error,
    command_result,
    raise_if_rejected,
    start_rejected_error,
    start_result,
)
from durable_workflow.client_rewind import StubRewind
from durable_workflow.client_state import StubState
from durable_workflow.client_testing import StubTesting, drains_after, waits_inline
from durable_workflow.conf import get_settings
from durable_workflow.converter import handle_signature, payloads
from durable_workflow.description import WorkflowDescription
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.failures import class_path
from durable_workflow.exceptions import (
    WorkflowNotFoundError,
    WorkflowParkedError,
    WorkflowResultTimeoutError,
)
from durable_workflow.executor import intake, start_workflow
from durable_workflow.executor.archiving import request_archive
from durable_workflow.executor.closing import request_cancel, request_terminate
from durable_workflow.executor.control import request_repair
from durable_workflow.headers import check_headers
from durable_workflow.ids import validate_instance_id
from durable_workflow.interceptors import (
    CloseWorkflowInput,
    SignalWithStartInput,
    StartWorkflowInput,
)
from durable_workflow.models import RunStatus
from durable_workflow.options import StartOptions
from durable_workflow.results import CommandResult, SignalWithStartResult, StartResult
from durable_workflow.store import history, runs, waits
from durable_workflow.store.records import RunRecord

#: A caller's request id (``None``: none).
Id = str | None


class WorkflowStub(StubTesting, StubMessages, StubRewind, StubState[R], Generic[P, R]):
    """A handle on one workflow instance (and, after ``load_run``, one pinned run)."""

    def __init__(
        self,
        instance_id: str,
        workflow_type: str,
        *,
        run: RunRecord | None = None,
        pinned: bool = False,
        namespace: str = namespaces.DEFAULT,
    ) -> None:
        self._instance_id = instance_id
        self._namespace = namespace
        self._workflow_type = workflow_type
        self._run = run
        self._pinned = pinned
        self._headers: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<WorkflowStub {self._workflow_type} {self._instance_id} {self.status()}>"

    # ------------------------------------------------------------ factories
    @overload
    @classmethod
    def make(
        cls,
        workflow: type[Handles[P, R]],
        instance_id: str | None = None,
        *,
        namespace: str | None = None,
    ) -> WorkflowStub[P, R]: ...
    @overload
    @classmethod
    def make(
        cls, workflow: str, instance_id: str | None = None, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]: ...
    @classmethod
    def make(
        cls, workflow: type | str, instance_id: str | None = None, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]:
        """A stub for a new instance; the id is reserved at once (status ``reserved``) in
        ``namespace`` (the configured default unless given)."""
        workflow_type = _type_key(workflow)
        registry.workflow_class(workflow_type)  # an unknown type key fails here, clearly
        space = namespaces.resolve(namespace)
        instance_id = uuid.uuid4().hex if instance_id is None else validate_instance_id(instance_id)
        runs.reserve_instance(instance_id, workflow_type, namespace=space, now=clock.now())
        run = runs.current_run(instance_id, namespace=space)
        return cls(instance_id, workflow_type, run=run, namespace=space)

    @classmethod
    def load(cls, instance_id: str, *, namespace: str | None = None) -> WorkflowStub[..., Any]:
        """A stub for an existing instance of ``namespace`` (the configured default unless
        given) that follows its newest run."""
        space = namespaces.resolve(namespace)
        instance = runs.get_instance(validate_instance_id(instance_id), namespace=space)
        if instance is None:
            raise WorkflowNotFoundError(
                f"no workflow instance {instance_id!r} in namespace {space!r}"
            )
        run = runs.current_run(instance_id, namespace=space)
        return cls(instance_id, instance.workflow_type, run=run, namespace=space)

    @classmethod
    def load_run(
        cls, run_id: str | uuid.UUID, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]:
        """A stub pinned to one run, current or historical. Run ids are unique across
        namespaces; with ``namespace`` the run must belong to it."""
        space = None if namespace is None else namespaces.check(namespace)
        try:
            run = runs.get_run(uuid.UUID(str(run_id)))
        except ValueError:
            run = None
        if run is None or space not in (None, run.namespace):
            raise WorkflowNotFoundError(f"no workflow run {run_id!r}")
        return cls(
            run.instance_id, run.workflow_type, run=run, pinned=True, namespace=run.namespace
        )

    @property
    def namespace(self) -> str:
        """The namespace the instance belongs to."""
        return self._namespace

    def with_headers(self, headers: dict[str, str]) -> WorkflowStub[P, R]:
        """A copy of this stub whose commands (start, signal, update, query, cancel,
        terminate) carry ``headers`` besides those it carries already. Refused with
        ``InvalidHeaderError`` unless it is a small map of safe strings."""
        stub: WorkflowStub[P, R] = WorkflowStub(
            self._instance_id,
            self._workflow_type,
            run=self._run,
            pinned=self._pinned,
            namespace=self._namespace,
        )
        stub._headers = {**self._headers, **check_headers(headers)}
        return stub

    # ------------------------------------------------------------- commands
    @overload
    def start(self, options: StartOptions, /, *args: P.args, **kwargs: P.kwargs) -> StartResult: ...
    @overload
    def start(self, /, *args: P.args, **kwargs: P.kwargs) -> StartResult: ...
    @overload
    def start(self, /, *args: Any, options: StartOptions) -> StartResult: ...
    def start(self, /, *args: Any, **kwargs: Any) -> StartResult:
        """Start the workflow; raises ``WorkflowAlreadyStartedError`` when rejected.

        Options go first (or as ``options=``); keyword arguments move to their
        positions in ``handle()``. A value the converter refuses raises
        ``PayloadCodecError`` naming it, and nothing is written.
        """
        result = self.attempt_start(*args, **kwargs)
        if result.rejected:
            raise start_rejected_error(result, self._instance_id)
        return result

    @overload
    def attempt_start(
        self, options: StartOptions, /, *args: P.args, **kwargs: P.kwargs
    ) -> StartResult: ...
    @overload
    def attempt_start(self, /, *args: P.args, **kwargs: P.kwargs) -> StartResult: ...
    @overload
    def attempt_start(self, /, *args: Any, options: StartOptions) -> StartResult: ...
    @drains_after
    def attempt_start(self, /, *args: Any, **kwargs: Any) -> StartResult:
        """Start the workflow and report the outcome instead of raising on rejection."""
        options: StartOptions | None = kwargs.pop("options", None)
        if options is None and args and isinstance(args[0], StartOptions):
            options, args = args[0], args[1:]
        elif options is None and args and isinstance(args[-1], StartOptions):
            options, args = args[-1], args[:-1]
        workflow_cls = workflow_class_or_none(self._workflow_type)
        values = handle_signature(workflow_cls).bind(args, kwargs, f"start({self._workflow_type})")
        options = options or StartOptions()
        return interceptors.call(
            "start_workflow",
            interceptors.StartWorkflowInput(
                self._workflow_type,
                self._instance_id,
                values,
                options,
                headers={**self._headers, **options.headers},
            ),
            functools.partial(self._start, workflow_cls),
        )

    def _start(self, workflow_cls: type | None, input: StartWorkflowInput) -> StartResult:
        """The innermost link of ``start_workflow``: record the start."""
        outcome = start_workflow(
            instance_id=self._instance_id,
            workflow_type=self._workflow_type,
            workflow_class=class_path(workflow_cls) if workflow_cls else "",
            arguments=payloads.plain_arguments(input.args, get_settings().PAYLOAD_CODEC),
            options=dataclasses.replace(input.options, headers=input.headers),
            queue=getattr(workflow_cls, "queue", None),
            connection=getattr(workflow_cls, "connection", None),
            namespace=self._namespace,
        )
        self.refresh()
        return start_result(outcome)

    @drains_after
    def repair(self, *, reason: str = "", request_id: Id = None) -> CommandResult:
        """Re-create a lost or failed workflow task (e.g. after fixing a determinism bug),
        reclaim the run's expired leases and re-send its ready tasks; ``metadata`` says
        which (``reclaimed_leases``, ``resent_tasks``, ``recreated_workflow_task``).
        ``request_id``: sent again with the same id, nothing is repaired twice; the first
        outcome comes back."""
        outcome = request_repair(
            self._instance_id, reason=reason, request_id=request_id, namespace=self._namespace
        )
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
            namespace=self._namespace,
        )

    # ----------------------------------------------------- cancel / terminate
    # ``request_id``: sent again with the same id, nothing is recorded; the first outcome
    # comes back.
    @drains_after
    def attempt_cancel(self, reason: str | None = None, *, request_id: Id = None) -> CommandResult:
        """Ask the run to stop; the body sees ``WorkflowCancelled`` at its next step."""
        return self._close(request_cancel, reason, request_id)

    def cancel(self, reason: str | None = None, *, request_id: Id = None) -> CommandResult:
        """``attempt_cancel`` that raises ``CommandRejected`` when the command is rejected."""
        return raise_if_rejected(self.attempt_cancel(reason, request_id=request_id), "cancel")

    @drains_after
    def attempt_terminate(
        self, reason: str | None = None, *, request_id: Id = None
    ) -> CommandResult:
        """Close the run at once; no more workflow code runs."""
        return self._close(request_terminate, reason, request_id)

    def terminate(self, reason: str | None = None, *, request_id: Id = None) -> CommandResult:
        """``attempt_terminate`` that raises ``CommandRejected`` when the command is rejected."""
        return raise_if_rejected(self.attempt_terminate(reason, request_id=request_id), "terminate")

    # --------------------------------------------------------------- archive
    def attempt_archive(self, reason: str | None = None, *, request_id: Id = None) -> CommandResult:
        """Archive the closed run(s): they leave the default run lists, nothing is deleted.

        The instance's closed runs go together (a pinned stub archives its run alone);
        an open run is refused (``rejected_run_not_closed``), runs already archived give
        ``archive_not_needed``.
        """
        return self._close(request_archive, reason, request_id)

    def archive(self, reason: str | None = None, *, request_id: Id = None) -> CommandResult:
        """``attempt_archive`` that raises ``CommandRejected`` when the command is rejected."""
        return raise_if_rejected(self.attempt_archive(reason, request_id=request_id), "archive")

    def _close(self, command: Any, reason: str | None, request_id: Id) -> CommandResult:
        kind = {request_cancel: "cancel", request_terminate: "terminate"}.get(command, "archive")

        def close(input: CloseWorkflowInput) -> CommandResult:
            if kind == "archive":  # bookkeeping on closed runs: no headers recorded
                outcome = command(
                    self._instance_id,
                    run_id=input.run_id,
                    reason=input.reason,
                    request_id=input.request_id,
                    namespace=self._namespace,
                )
            else:
                outcome = command(
                    self._instance_id,
                    run_id=input.run_id,
                    reason=input.reason,
                    request_id=input.request_id,
                    headers=input.headers,
                    namespace=self._namespace,
                )
            self.refresh()
            return command_result(outcome, self._pinned)

        closing = CloseWorkflowInput(
            kind,
            self._workflow_type,
            self._instance_id,
            self._target_run(),
            reason,
            request_id,
            dict(self._headers),
        )
        return interceptors.call(f"{kind}_workflow", closing, close)

    # -------------------------------------------------------------- signals
    @drains_after
    def signal_with_start(
        self,
        name: str,
        *signal_args: Any,
        start_args: list[Any] | None = None,
        options: StartOptions | None = None,
        request_id: Id = None,
    ) -> SignalWithStartResult:
        """Start the workflow if no run is active, and signal it, atomically.

        ``request_id``: sent again with the same id, nothing is started or signalled
        again; the first outcome (its start and signal) comes back."""
        options = options or StartOptions()

        def send(input: SignalWithStartInput) -> SignalWithStartResult:
            outcome = intake.signal_with_start(
                signal_name=input.name,
                signal_arguments=plain(input.signal_args),
                **self._with_start_fields(input),
            )
            self.refresh()
            start = outcome.start
            return SignalWithStartResult(
                start=None if start is None else start_result(start),
                signal=command_result(outcome.signal, False),
            )

        return interceptors.call(
            "signal_with_start_workflow",
            SignalWithStartInput(
                self._workflow_type,
                self._instance_id,
                name,
                list(signal_args),
                list(start_args or []),
                options,
                request_id,
                {**options.headers, **self._headers},
            ),
            send,
        )

    # ---------------------------------------------------------------- state
    def refresh(self) -> WorkflowStub[P, R]:
        """Re-read the run from the database (status and output are cached until then)."""
        if self._pinned and self._run is not None:
            self._run = runs.get_run(self._run.id)
        else:
            self._run = runs.current_run(self._instance_id, namespace=self._namespace)
        return self

    def result(
        self,
        timeout: float | None = None,
        *,
        poll_interval: float = 0.05,
        result_type: Any = None,
    ) -> R:
        """Wait for the run to close and return its output, typed as ``handle()`` declares.

        Raises ``WorkflowFailedError`` (with the failure's type, message, traceback
        and, when this process knows it, the original exception class),
        ``WorkflowTimedOutError``, ``WorkflowCancelledError``,
        ``WorkflowTerminatedError``, ``WorkflowParkedError`` (a failed workflow
        task holds the run) or, when ``timeout`` seconds pass first,
        ``WorkflowResultTimeoutError``. ``None`` waits as long as it takes.
        """
        self.wait(math.inf if timeout is None else timeout, poll_interval=poll_interval)
        if self.running():
            self._raise_if_parked()
            raise WorkflowResultTimeoutError(
                f"workflow {self._instance_id!r} is still {self.status()} after {timeout}s"
            )
        run = self._run
        assert run is not None
        if run.status == RunStatus.COMPLETED and run.closed_reason != "continued":
            return self.output(result_type=result_type)  # type: ignore[return-value]
        raise closed_error(run, self._instance_id)

    def history(self) -> list[HistoryEvent]:
        """The run's history events, in order."""
        if self._run is None:
            return []
        return history.load_history(self._run.id)

    def describe(self) -> WorkflowDescription:
        """The run now: its status, what it waits on and, when it is parked on a failed
        workflow task, that failure (read from committed rows, nothing is replayed)."""
        return waits.describe(
            self._instance_id, self._workflow_type, self.refresh()._run, namespace=self._namespace
        )

    @waits_inline
    def wait(self, timeout: float = 30.0, *, poll_interval: float = 0.05) -> WorkflowStub[P, R]:
        """Block until the run closes (or ``timeout`` seconds pass); for scripts and tests.

        Raises ``WorkflowParkedError`` as soon as the run is parked on a failed
        workflow task: it would not close by itself.
        """
        deadline = time.monotonic() + timeout
        while self.refresh().running():
            self._raise_if_parked()
            if time.monotonic() >= deadline:
                break
            pause(poll_interval)
        return self

    # ------------------------------------------------- awaitable twins (client_async)
    @overload
    @classmethod
    async def amake(
        cls,
        workflow: type[Handles[P, R]],
        instance_id: str | None = None,
        *,
        namespace: str | None = None,
    ) -> WorkflowStub[P, R]: ...
    @overload
    @classmethod
    async def amake(
        cls, workflow: str, instance_id: str | None = None, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]: ...
    @classmethod
    async def amake(
        cls, workflow: type | str, instance_id: str | None = None, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]:
        """``make()`` as a coroutine."""
        return await call(lambda: cls.make(workflow, instance_id, namespace=namespace))

    @classmethod
    async def aload(
        cls, instance_id: str, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]:
        """``load()`` as a coroutine."""
        return await call(lambda: cls.load(instance_id, namespace=namespace))

    @classmethod
    async def aload_run(
        cls, run_id: str | uuid.UUID, *, namespace: str | None = None
    ) -> WorkflowStub[..., Any]:
        """``load_run()`` as a coroutine."""
        return await call(lambda: cls.load_run(run_id, namespace=namespace))

    astart = twin(start)
    aattempt_start = twin(attempt_start)
    arepair = twin(repair)
    asend_message = twin(send_message)
    aattempt_cancel = twin(attempt_cancel)
    acancel = twin(cancel)
    aattempt_terminate = twin(attempt_terminate)
    aterminate = twin(terminate)
    aattempt_archive = twin(attempt_archive)
    aarchive = twin(archive)
    asignal_with_start = twin(signal_with_start)
    arefresh = twin(refresh)
    aresult = twin(result)
    ahistory = twin(history)
    adescribe = twin(describe)
    await_ = twin(wait)

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


def _type_key(workflow: type | str) -> str:
    if isinstance(workflow, str):
        if not workflow.strip():
            raise ValueError("a workflow type key cannot be empty")
        return workflow
    key = getattr(workflow, "type_key", None)
    if not isinstance(workflow, type) or not key:
        raise TypeError(f"expected a Workflow subclass or a type key, not {workflow!r}")
    return str(key)
