"""Child workflows, and other workflows the body signals or cancels.

A child is one durable operation (``ChildOp``) with two moments: *started*
(history records ``ChildRunStarted``, or ``ChildWorkflowStartRejected`` when its
instance id was taken) and *closed* (``ChildRun*``). ``dw.child()`` waits for
the close; ``dw.start_child()`` waits only for the start and hands back the
operation, so the body can wait for its result later (alone, or as a member of
``all()`` / ``select()``), signal it or cancel it.

Signals and cancel requests to another workflow are steps of their own
(``ExternalSignalSent`` / ``ExternalCancelRequested``) that record the
command's outcome. The executor records that outcome, like a child's start, in
the same workflow task, and feeds it back before the task ends (the outbox's
``refeed``): the body waits at the step and goes on when the event is
delivered, at the same point of history on every replay.
"""

from __future__ import annotations

from typing import Any

from durable_workflow.engine.calls import Call, Meta
from durable_workflow.engine.commands import CancelExternal, SignalExternal, StartChild
from durable_workflow.engine.core import Core
from durable_workflow.engine.limits import StructuralLimits
from durable_workflow.engine.operations import (
    ChildOp,
    ExternalCancelOp,
    ExternalOp,
    ExternalSignalOp,
)
from durable_workflow.engine.scheduler import Future
from durable_workflow.engine.signatures import Signature
from durable_workflow.engine.steps import Steps

#: What a signal or cancel request sent by the body returns (see ``ExternalOp.settle``).
Outcome = dict[str, Any]


def child_instance_id(run_id: object, step: int) -> str:
    """A child's default instance id: deterministic, and unique to the parent run and step."""
    return f"{run_id}:child:{step}"


class Children:
    """The body's children and its messages to other workflows (see the module docstring)."""

    def __init__(self, core: Core, steps: Steps, limits: StructuralLimits, run_id: str) -> None:
        self._core = core
        self._steps = steps
        self._limits = limits
        self._run_id = run_id

    # ------------------------------------------------------------- starting
    def start(
        self,
        *,
        workflow_type: str,
        workflow_class: str,
        arguments: list[Any],
        options: dict[str, Any],
        result_type: Any = None,
        wait: bool = True,
    ) -> Any:
        """The child's result (``wait``), or its ``ChildOp`` once it has started."""
        core, steps = self._core, self._steps
        chosen = options.get("instance_id")

        def start(meta: Meta) -> Future:
            sig: Signature = ("child", workflow_type)
            encoded = steps.encode_if_new(sig, lambda: core.payloads.encode_arguments(arguments))
            step, recorded = core.claim(sig)
            instance_id = str(chosen or child_instance_id(self._run_id, step))
            op = ChildOp(step, workflow_type, instance_id, result_type)
            if recorded is None:
                if meta is None:
                    self._limits.check_pending("pending_child_count", 1)
                command = StartChild(
                    step=step,
                    workflow_type=workflow_type,
                    workflow_class=workflow_class,
                    arguments=encoded,
                    options=options,
                    instance_id=instance_id,
                    group=meta,
                )
                core.outbox.issue(command, recorded)
                if not wait:
                    core.outbox.refeed = True  # the body waits for the start, in this task
            return core.ops.add(op).future

        if wait:
            return steps.run_call(Call("child", workflow_type, start))
        steps.refuse_in_group("start_child()")
        op = core.ops.get(start(None).step)
        assert isinstance(op, ChildOp)
        core.scheduler.wait(op.started)
        return op

    def result(self, op: ChildOp) -> Any:
        """Wait for a started child to close (a member of ``all()`` / ``select()`` too)."""
        return self._steps.run_call(Call("child", op.name, lambda meta: op.future, op.future))

    def started(self) -> list[ChildOp]:
        """The children the body started so far, in step order."""
        return self._core.ops.children()

    # ------------------------------------------------------ other workflows
    def signal(
        self,
        instance_id: str,
        run_id: str | None,
        name: str,
        args: list[Any],
        *,
        headers: dict[str, str] | None = None,
    ) -> Outcome:
        """Signal another workflow (a step); its outcome, as recorded."""
        self._steps.refuse_in_group("signalling a workflow")
        core = self._core
        legacy = core.ledger.recorded(core.ledger.step + 1)
        if legacy is not None and legacy.payload.get("effect") == "child_signal":
            return self._legacy_signal()
        sig: Signature = ("external_signal", name)
        encoded = self._steps.encode_if_new(sig, lambda: core.payloads.encode_arguments(args))
        step, recorded = core.claim(sig)
        command = SignalExternal(
            step=step,
            instance_id=instance_id,
            run_id=run_id,
            signal_name=name,
            arguments=encoded,
            headers=dict(headers or {}),
        )
        return self._send(ExternalSignalOp(step, name), command, recorded is None)

    def cancel(self, instance_id: str, run_id: str | None, reason: str | None) -> Outcome:
        """Ask another workflow to cancel (a step); the request's outcome, as recorded."""
        self._steps.refuse_in_group("cancelling a workflow")
        step, recorded = self._core.claim(("external_cancel", None))
        command = CancelExternal(step=step, instance_id=instance_id, run_id=run_id, reason=reason)
        return self._send(ExternalCancelOp(step), command, recorded is None)

    def _send(self, op: ExternalOp, command: SignalExternal | CancelExternal, new: bool) -> Outcome:
        core = self._core
        if new:
            core.outbox.issue(command, None)
            core.outbox.refeed = True
        outcome: Outcome = core.scheduler.wait(core.ops.add(op).future)
        return outcome

    def _legacy_signal(self) -> Outcome:
        """A child signal recorded as a side effect (before signals had outcome events):
        replay it as it was. Only replay comes here, so nothing is issued."""
        _, recorded = self._core.claim(("side_effect", None))
        payload = recorded.payload if recorded is not None else {}
        return {
            "outcome": payload.get("outcome"),
            "rejection_reason": None,
            "command_id": payload.get("command_id"),
            "run_id": None,
        }
