"""Handles on other workflows, from inside a workflow body.

``ChildWorkflowHandle``: a child this run started (``dw.start_child()``,
``last_child()``, ``children()``): wait for its result, signal it, cancel it.
``ExternalWorkflowHandle`` (``dw.external_workflow(instance_id)``): any other
workflow, to signal or cancel. Signals and cancel requests are durable steps
whose outcome (accepted, or rejected with a reason) is recorded in history and
returned identically on every replay.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from durable_workflow import interceptors
from durable_workflow.exceptions import CommandRejected
from durable_workflow.headers import check_headers
from durable_workflow.ids import validate_instance_id
from durable_workflow.results import CommandResult
from durable_workflow.text import check_name, check_reason

if TYPE_CHECKING:
    from durable_workflow.engine.operations import ChildOp
    from durable_workflow.engine.runtime import WorkflowRuntime


class _Target:
    """Signal and cancel, shared by both kinds of handle."""

    _runtime: WorkflowRuntime

    def id(self) -> str:
        raise NotImplementedError

    def _run_target(self) -> str | None:
        return None

    def attempt_signal(self, name: str, *args: Any) -> CommandResult:
        """Signal the workflow (a durable step); the outcome says if it was accepted."""
        return self.attempt_signal_with_arguments(name, list(args))

    def attempt_signal_with_arguments(
        self, name: str, arguments: list[Any] | dict[str, Any]
    ) -> CommandResult:
        """``attempt_signal`` with a positional list or a named map of arguments."""
        check_name(name, field="signal name")
        values = list(arguments.values()) if isinstance(arguments, dict) else list(arguments)
        runtime = self._runtime

        def send(input: interceptors.SignalExternalInput) -> Any:
            return runtime.signal_workflow(
                input.instance_id,
                input.run_id,
                input.name,
                list(input.args),
                headers=check_headers(input.headers),
            )

        signal = interceptors.SignalExternalInput(self.id(), self._run_target(), name, values)
        return self._result(interceptors.call("signal_external", signal, send))

    def signal(self, name: str, *args: Any) -> None:
        """Signal the workflow; raises ``CommandRejected`` when the signal is rejected."""
        _raise_if_rejected(self.attempt_signal(name, *args), f"signal {name!r}")

    def signal_with_arguments(self, name: str, arguments: list[Any] | dict[str, Any]) -> None:
        """``signal`` with a positional list or a named map of arguments."""
        result = self.attempt_signal_with_arguments(name, arguments)
        _raise_if_rejected(result, f"signal {name!r}")

    def attempt_cancel(self, reason: str | None = None) -> CommandResult:
        """Ask the workflow to cancel (a durable step); the outcome of the request."""
        check_reason(reason)
        outcome = self._runtime.cancel_workflow(self.id(), self._run_target(), reason)
        return self._result(outcome, reason)

    def cancel(self, reason: str | None = None) -> None:
        """Ask the workflow to cancel; raises ``CommandRejected`` when that is rejected
        (it is not running any more, say). It closes ``cancelled`` once its body has
        seen the request and finished any clean-up."""
        _raise_if_rejected(self.attempt_cancel(reason), "cancel")

    def _result(self, outcome: dict[str, Any], reason: str | None = None) -> CommandResult:
        return CommandResult(
            accepted=not str(outcome.get("outcome") or "").startswith("rejected"),
            outcome=str(outcome.get("outcome") or ""),
            command_id=str(outcome.get("command_id") or ""),
            instance_id=self.id(),
            run_id=outcome.get("run_id"),
            rejection_reason=outcome.get("rejection_reason"),
            target_scope="run" if self._run_target() else "instance",
            reason=reason,
        )


def _raise_if_rejected(result: CommandResult, what: str) -> None:
    if result.rejected:
        raise CommandRejected(
            result.outcome,
            result.rejection_reason,
            f"{what} to workflow {result.instance_id!r} was rejected: "
            f"{result.rejection_reason or result.outcome}",
        )


R = TypeVar("R")


class ChildWorkflowHandle(_Target, Generic[R]):
    """A child started by this run, addressed by its stable instance id; ``R`` is the
    type its ``result()`` returns (the child's ``handle()`` return annotation)."""

    def __init__(self, runtime: WorkflowRuntime, op: ChildOp) -> None:
        self._runtime = runtime
        self._op = op

    def __repr__(self) -> str:
        return f"<ChildWorkflowHandle {self.id()}>"

    def id(self) -> str:
        """The child's instance id (stable across its continue-as-new)."""
        return self._op.instance_id

    def run_id(self) -> str | None:
        """The newest child run the parent's history has seen."""
        return self._runtime.child_run_id(self._op.step)

    def call_id(self) -> int:
        """The parent's step that started the child (stable per invocation)."""
        return self._op.step

    def done(self) -> bool:
        """True once history says the child closed (its result, or its failure, is in)."""
        return self._op.future.done

    def result(self) -> R:
        """Wait for the child to close; its result, or its failure raised.

        Inside ``dw.all()`` / ``dw.select()`` members (``lambda: handle.result()``,
        or the handle itself) it is collected like any other durable call.
        """
        value: R = self._runtime.child_result(self._op)
        return value

    #: A handle is a member of ``dw.all([...])`` / ``dw.select([...])`` as it is.
    __call__ = result


class ExternalWorkflowHandle(_Target):
    """Another workflow this body signals or cancels (``dw.external_workflow``)."""

    def __init__(self, runtime: WorkflowRuntime, instance_id: str, run_id: str | None) -> None:
        self._runtime = runtime
        self._instance_id = instance_id
        self._run_id = run_id

    def __repr__(self) -> str:
        return f"<ExternalWorkflowHandle {self._instance_id}>"

    def id(self) -> str:
        return self._instance_id

    def run_id(self) -> str | None:
        """The run this handle is pinned to, or ``None``: the instance's newest run."""
        return self._run_id

    def _run_target(self) -> str | None:
        return self._run_id


def external_workflow(instance_id: str, run_id: str | None = None) -> ExternalWorkflowHandle:
    """A handle on another workflow, to signal it or ask it to cancel.

    ``run_id`` pins one run (a command then fails with ``rejected_not_current`` once
    that run is no longer the newest); by default commands go to the newest run of
    the instance. A workflow cannot address itself this way.
    """
    from durable_workflow.authoring.helpers import _runtime

    runtime = _runtime("external_workflow")
    target = validate_instance_id(instance_id)
    if target == runtime.workflow_id:
        raise ValueError(
            "a workflow cannot signal or cancel itself through a handle; "
            "call the method (or change the state) directly"
        )
    if run_id is not None:
        run_id = str(uuid.UUID(str(run_id)))  # ValueError for anything but a run id
    return ExternalWorkflowHandle(runtime, target, run_id)
