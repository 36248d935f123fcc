"""Signals, queries and updates of ``WorkflowStub`` (mixed into it).

Each takes the durable name (a str) or, typed, the handler itself:
``stub.update(OrderWorkflow.mark_ready, 3)`` checks the arguments against the
method and gives its return type. Arguments go through the data converter here,
so a refused value fails before anything is written.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from durable_workflow import interceptors, registry
from durable_workflow.authoring.decorators import UpdateMethod
from durable_workflow.client_async import pause, twin
from durable_workflow.client_results import (
    command_result,
    start_rejected_error,
    start_result,
    update_result,
)
from durable_workflow.client_testing import (
    drains_after,
    drains_before_inspect,
    update_waits_inline,
)
from durable_workflow.conf import get_settings
from durable_workflow.converter import payloads, signature_of
from durable_workflow.engine.failures import class_path
from durable_workflow.exceptions import (
    QueryRejectedError,
    SignalRejectedError,
    UpdateHandlerFailedError,
    UpdateRejectedError,
    UpdateWaitTimedOutError,
    WorkflowNotFoundError,
)
from durable_workflow.executor import intake, readonly, updates
from durable_workflow.options import StartOptions
from durable_workflow.results import (
    CommandResult,
    UpdateResult,
    UpdateWithStartResult,
)
from durable_workflow.store import commands, runs
from durable_workflow.store import messages as message_store
from durable_workflow.store.messages import UpdateRecord

if TYPE_CHECKING:
    from durable_workflow.store.records import RunRecord

MP = ParamSpec("MP")
MR = TypeVar("MR")

Arguments = list[Any] | dict[str, Any]


class StubMessages:
    """The signal, query and update methods of ``WorkflowStub``."""

    _instance_id: str
    _namespace: str
    _workflow_type: str
    _run: RunRecord | None
    _pinned: bool
    _headers: dict[str, str]

    def _target_run(self) -> str | None:
        return str(self._run.id) if self._pinned and self._run else None

    def _codec(self) -> str:
        return self._run.payload_codec if self._run else get_settings().PAYLOAD_CODEC

    def _with_start_fields(
        self, input: interceptors.SignalWithStartInput | interceptors.UpdateWithStartInput
    ) -> dict[str, Any]:
        """What signal-with-start and update-with-start both record of the start."""
        workflow_cls = workflow_class_or_none(self._workflow_type)
        return {
            "instance_id": self._instance_id,
            "workflow_type": self._workflow_type,
            "workflow_class": class_path(workflow_cls) if workflow_cls else "",
            "start_arguments": plain(input.start_args),
            "options": dataclasses.replace(input.options, headers=input.headers),
            "queue": getattr(workflow_cls, "queue", None),
            "connection": getattr(workflow_cls, "connection", None),
            "request_id": input.request_id,
            "namespace": self._namespace,
        }

    def _plain(self, arguments: Arguments) -> Any:
        return payloads.plain_arguments(arguments, self._codec())

    # -------------------------------------------------------------- signals
    def attempt_signal(self, name: str, *args: Any, request_id: str | None = None) -> CommandResult:
        """Send a signal; the result says whether it was accepted and why not. A repeated
        ``request_id`` records nothing and returns the first outcome."""
        return self.attempt_signal_with_arguments(name, list(args), request_id=request_id)

    @drains_after
    def attempt_signal_with_arguments(
        self, name: str, arguments: Arguments, *, request_id: str | None = None
    ) -> CommandResult:
        """Send a signal with a positional list or a named map of arguments.

        ``request_id``: sent again with the same id, the signal is not recorded twice;
        the first outcome comes back.
        """

        def send(input: interceptors.SignalWorkflowInput) -> CommandResult:
            outcome = intake.send_signal(
                self._instance_id,
                input.name,
                self._plain(input.args),
                run_id=input.run_id,
                request_id=input.request_id,
                headers=input.headers,
                namespace=self._namespace,
            )
            return command_result(outcome, self._pinned)

        signal = interceptors.SignalWorkflowInput(
            self._workflow_type,
            self._instance_id,
            self._target_run(),
            name,
            arguments,
            request_id,
            dict(self._headers),
        )
        return interceptors.call("signal_workflow", signal, send)

    @overload
    def signal(
        self, signal: Callable[Concatenate[Any, MP], Any], /, *args: MP.args, **kwargs: MP.kwargs
    ) -> CommandResult: ...
    @overload
    def signal(self, signal: str, /, *args: Any) -> CommandResult: ...
    def signal(self, signal: Any, /, *args: Any, **kwargs: Any) -> CommandResult:
        """Send a signal (by name or ``@dw.signal`` method); ``SignalRejectedError`` if refused."""
        name, values = _handler_call(signal, "_dw_signal_name", "@dw.signal", args, kwargs)
        result = self.attempt_signal_with_arguments(name, values)
        if result.rejected:
            raise SignalRejectedError(
                result.rejection_reason or result.outcome,
                f"signal {name!r} was rejected: {result.rejection_reason or result.outcome}",
                name=name,
                outcome=result.outcome,
                **result.metadata,
            )
        return result

    # -------------------------------------------------------------- queries
    @overload
    def query(
        self, query: Callable[Concatenate[Any, MP], MR], /, *args: MP.args, **kwargs: MP.kwargs
    ) -> MR: ...
    @overload
    def query(self, query: str, /, *args: Any) -> Any: ...
    def query(self, query: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Ask the workflow's state through a ``@dw.query`` method (durable or method name)."""
        name, values = _handler_call(query, "_dw_query_name", "@dw.query", args, kwargs)
        return self.query_with_arguments(name, values)

    def query_with_arguments(self, name: str, arguments: Arguments) -> Any:
        run = (
            self._run
            if self._pinned
            else runs.current_run(self._instance_id, namespace=self._namespace)
        )
        if run is None:
            raise QueryRejectedError(
                "rejected_not_started", f"workflow {self._instance_id!r} has not started"
            )

        def ask(input: interceptors.QueryWorkflowInput) -> Any:
            return readonly.run_query(
                run, input.name, self._plain(input.args), headers=input.headers
            )[1]

        query = interceptors.QueryWorkflowInput(
            self._workflow_type,
            self._instance_id,
            str(run.id),
            name,
            arguments,
            dict(self._headers),
        )
        return interceptors.call("query_workflow", query, ask)

    # -------------------------------------------------------------- updates
    @drains_after
    def submit_update(self, name: str, *args: Any, request_id: str | None = None) -> UpdateResult:
        """Record the update and return as soon as it is accepted (or rejected). A
        repeated ``request_id`` submits nothing and answers for the first update."""
        return self._submit(name, list(args), request_id)

    def _submit(self, name: str, arguments: Arguments, request_id: str | None) -> UpdateResult:
        """Submit through the client interceptors (``update_workflow``)."""

        def submit(input: interceptors.UpdateWorkflowInput) -> UpdateResult:
            outcome = updates.submit_update(
                self._instance_id,
                input.name,
                self._plain(input.args),
                run_id=input.run_id,
                request_id=input.request_id,
                headers=input.headers,
                namespace=self._namespace,
            )
            return self._update_result(outcome.record, outcome)

        update = interceptors.UpdateWorkflowInput(
            self._workflow_type,
            self._instance_id,
            self._target_run(),
            name,
            arguments,
            request_id,
            dict(self._headers),
        )
        return interceptors.call("update_workflow", update, submit)

    def attempt_update(
        self,
        name: str,
        *args: Any,
        wait_timeout: float | None = None,
        request_id: str | None = None,
    ) -> UpdateResult:
        """Submit the update and wait (bounded) for the workflow to apply it."""
        return self.attempt_update_with_arguments(
            name, list(args), wait_timeout=wait_timeout, request_id=request_id
        )

    @update_waits_inline
    def attempt_update_with_arguments(
        self,
        name: str,
        arguments: Arguments,
        *,
        wait_timeout: float | None = None,
        request_id: str | None = None,
    ) -> UpdateResult:
        """``attempt_update`` with a list or map of arguments. ``request_id``: the same id
        again submits nothing and answers for the update the first call submitted."""
        result = self._submit(name, arguments, request_id)
        if not result.accepted or result.update_id is None:
            return result
        return self._wait_for(result, wait_timeout)

    def _wait_for(self, result: UpdateResult, wait_timeout: float | None) -> UpdateResult:
        """Poll an accepted update until it closes or the budget runs out."""
        assert result.update_id is not None
        settings = get_settings()
        budget = settings.UPDATE_WAIT_TIMEOUT_SECONDS if wait_timeout is None else wait_timeout
        deadline = time.monotonic() + budget
        while True:
            latest = self.inspect_update(result.update_id)
            if latest.update_status != "accepted":
                return latest
            if time.monotonic() >= deadline:
                return dataclasses.replace(latest, wait_timed_out=True)
            pause(settings.UPDATE_POLL_INTERVAL_MS / 1000)

    @overload
    def update(
        self, update: UpdateMethod[Any, MP, MR], /, *args: MP.args, **kwargs: MP.kwargs
    ) -> MR: ...
    @overload
    def update(
        self, update: UpdateMethod[Any, ..., MR], /, *args: Any, wait_timeout: float | None
    ) -> MR: ...
    @overload
    def update(self, update: str, /, *args: Any, wait_timeout: float | None = None) -> Any: ...
    def update(self, update: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run an update and return its result, decoded as its handler declares.

        Raises ``UpdateRejectedError`` (refused, e.g. by its validator),
        ``UpdateHandlerFailedError`` (its handler raised), both ``UpdateFailedError``,
        or ``UpdateWaitTimedOutError``.
        """
        wait_timeout: float | None = kwargs.pop("wait_timeout", None)
        if isinstance(update, UpdateMethod):
            name, values = update.name, signature_of(update.fn).bind(args, kwargs, update.name)
        else:
            name, values = update, list(args)
        result = self.attempt_update_with_arguments(name, values, wait_timeout=wait_timeout)
        return self._result_or_raise(name, result)

    def _result_or_raise(self, name: str, result: UpdateResult) -> Any:
        if result.rejected:
            raise UpdateRejectedError(
                result.rejection_reason or result.outcome or "rejected",
                f"update {name!r} was rejected: {result.failure_message or result.outcome}",
                name=name,
                outcome=result.outcome or "rejected",
                update_id=result.update_id,
                **result.metadata,
            )
        if result.failed:
            raise self._handler_failure(name, result)
        if result.wait_timed_out:
            raise UpdateWaitTimedOutError(f"update {name!r} was accepted but has not finished yet")
        return result.result

    @drains_after
    def submit_update_with_start(
        self,
        name: str,
        *update_args: Any,
        start_args: list[Any] | None = None,
        options: StartOptions | None = None,
        request_id: str | None = None,
    ) -> UpdateWithStartResult:
        """Start the workflow if needed and submit the update, in one transaction; return
        once both are recorded (``inspect_update`` follows the update later).

        ``options`` defaults to ``return_existing_active``: an active run takes the
        update; with ``reject_duplicate`` an existing instance refuses the start and
        no update is submitted. ``request_id``: sent again with the same id, nothing is
        started or submitted again; the first outcome comes back.
        """
        options = options or StartOptions.return_existing_active()

        def submit(input: interceptors.UpdateWithStartInput) -> UpdateWithStartResult:
            outcome = updates.update_with_start(
                update_name=input.name,
                update_arguments=plain(input.update_args),
                **self._with_start_fields(input),
            )
            self._run = runs.current_run(self._instance_id, namespace=self._namespace)
            update = outcome.update
            return UpdateWithStartResult(
                start=start_result(outcome.start) if outcome.start is not None else None,
                update=self._update_result(update.record, update) if update is not None else None,
            )

        return interceptors.call(
            "update_with_start_workflow",
            interceptors.UpdateWithStartInput(
                self._workflow_type,
                self._instance_id,
                name,
                list(update_args),
                list(start_args or []),
                options,
                request_id,
                {**options.headers, **self._headers},
            ),
            submit,
        )

    @update_waits_inline
    def attempt_update_with_start(
        self,
        name: str,
        *update_args: Any,
        start_args: list[Any] | None = None,
        options: StartOptions | None = None,
        wait_timeout: float | None = None,
        request_id: str | None = None,
    ) -> UpdateWithStartResult:
        """``submit_update_with_start``, then wait (bounded) for the update to finish."""
        submitted = self.submit_update_with_start(
            name, *update_args, start_args=start_args, options=options, request_id=request_id
        )
        update = submitted.update
        if update is None or not update.accepted or update.update_id is None:
            return submitted
        return dataclasses.replace(submitted, update=self._wait_for(update, wait_timeout))

    def update_with_start(
        self,
        name: str,
        *update_args: Any,
        start_args: list[Any] | None = None,
        options: StartOptions | None = None,
        wait_timeout: float | None = None,
        request_id: str | None = None,
    ) -> Any:
        """Start the workflow if needed, run the update, return its result.

        Raises ``WorkflowAlreadyStartedError`` when the start is refused, else as
        ``update()`` does. A repeated ``request_id`` answers for the first update.
        """
        done = self.attempt_update_with_start(
            name,
            *update_args,
            start_args=start_args,
            options=options,
            wait_timeout=wait_timeout,
            request_id=request_id,
        )
        if done.update is None:
            start = done.start
            assert start is not None
            raise start_rejected_error(start, self._instance_id)
        return self._result_or_raise(name, done.update)

    def _handler_failure(self, name: str, result: UpdateResult) -> UpdateHandlerFailedError:
        failure = None
        if self._run is not None and result.update_id is not None:
            failure = commands.failure_of(
                run_id=self._run.id, source_kind="workflow_update", source_id=result.update_id
            )
        return UpdateHandlerFailedError(
            "update_failed",
            f"update {name!r} failed: {result.failure_message}",
            name=name,
            outcome="update_failed",
            exception_type=failure.exception_type if failure else "",
            exception_class=failure.exception_class if failure else "",
            failure_message=result.failure_message or "",
            traceback=failure.traceback if failure else "",
            update_id=result.update_id,
        )

    @drains_before_inspect
    def inspect_update(self, update_id: str) -> UpdateResult:
        """The stored lifecycle of an update; never waits."""
        record = message_store.get_update(update_id)
        if record is None or record.instance_id != self._instance_id:
            raise WorkflowNotFoundError(f"no update {update_id!r} for {self._instance_id!r}")
        return self._update_result(record, None)

    def _update_result(self, record: UpdateRecord | None, outcome: Any) -> UpdateResult:
        hint = None
        if record is not None and record.status == "completed":
            hint = _update_hint(self._workflow_type, record.update_name)
        return update_result(record, outcome, hint)

    # ------------------------------------------------- awaitable twins (client_async)
    aattempt_signal = twin(attempt_signal)
    aattempt_signal_with_arguments = twin(attempt_signal_with_arguments)
    asignal = twin(signal)
    aquery = twin(query)
    aquery_with_arguments = twin(query_with_arguments)
    asubmit_update = twin(submit_update)
    aattempt_update = twin(attempt_update)
    aattempt_update_with_arguments = twin(attempt_update_with_arguments)
    aupdate = twin(update)
    asubmit_update_with_start = twin(submit_update_with_start)
    aattempt_update_with_start = twin(attempt_update_with_start)
    aupdate_with_start = twin(update_with_start)
    ainspect_update = twin(inspect_update)


def _handler_call(
    handler: Any, marker: str, decorator: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, Arguments]:
    """(durable name, arguments) of a call by name or by decorated method."""
    if isinstance(handler, str):
        return handler, list(args)
    name = getattr(handler, marker, None)
    if not isinstance(name, str):
        raise TypeError(f"expected a durable name or a {decorator} method, not {handler!r}")
    return name, signature_of(handler).bind(args, dict(kwargs), name)


def _update_hint(workflow_type: str, name: str) -> Any:
    try:
        cls = registry.workflow_class(workflow_type)
    except LookupError:
        return None
    method = getattr(cls, "_dw_updates", {}).get(name)
    return signature_of(method.fn).result if method is not None else None


def workflow_class_or_none(type_key: str) -> type | None:
    try:
        return registry.workflow_class(type_key)
    except LookupError:
        return None


def plain(arguments: Any) -> Any:
    """Arguments as stored by a start (the configured payload codec)."""
    return payloads.plain_arguments(arguments, get_settings().PAYLOAD_CODEC)
