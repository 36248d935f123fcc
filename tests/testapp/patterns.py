"""Workflows for the everyday patterns of issue 21 (imported by workflows.py)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow


class CarryInputs(Workflow):
    """Continues as new as soon as it has seen an input; collects inputs across runs."""

    type_key = "tests.patterns.carry"
    signals = ["add"]

    def __init__(self) -> None:
        self.items: list[str] = []

    @dw.signal("add")
    def on_add(self, item: str) -> None:
        self.items.append(item)

    @dw.update("push")
    def push(self, item: str) -> str:
        self.items.append(item)
        return item

    def handle(self, seen: list[str], runs_left: int) -> list[str]:
        dw.wait(lambda: bool(self.items))
        seen = seen + self.items
        if runs_left > 1:
            dw.continue_as_new(seen, runs_left - 1)
        return seen


class WaitsForGo(Workflow):
    """A child that waits for the ``go`` signal (or is cancelled first)."""

    type_key = "tests.patterns.waits-for-go"
    signals = ["go"]

    def handle(self, value: Any) -> dict[str, Any]:
        return {"value": value, "go": dw.wait_signal("go")}


class StartsChildren(Workflow):
    """``dw.start_child``: the handle's result later, signalled, cancelled, in groups."""

    type_key = "tests.patterns.starts-children"

    def handle(self, mode: str) -> Any:
        from tests.testapp.composition import ChildEcho

        if mode == "result":
            handle = dw.start_child(ChildEcho, 41)
            known = [handle.id(), handle.run_id(), handle.done()]
            return {"known": known, "value": handle.result(), "done": handle.done()}
        if mode == "signal":
            handle = dw.start_child(WaitsForGo, "x")
            handle.signal("go", "now")
            return handle.result()
        if mode == "cancel":
            handle = dw.start_child(WaitsForGo, "x")
            handle.cancel("no longer needed")
            try:
                return handle.result()
            except dw.ChildWorkflowCancelled:
                return "child cancelled"
        if mode == "select":
            slow = dw.start_child(WaitsForGo, "slow")
            fast = dw.start_child(ChildEcho, 1)
            first = dw.select({"slow": slow, "fast": fast, "timer": lambda: dw.timer(3600)})
            slow.signal("go", "late")
            return [first.key, first.result(), slow.result()["go"]]
        if mode == "all":
            handles = [dw.start_child(ChildEcho, n) for n in range(3)]
            return dw.all([*handles, lambda: dw.timer(5)])
        return self.named(mode)

    def named(self, mode: str) -> Any:
        from tests.testapp.composition import ChildEcho

        options = dw.ChildWorkflowOptions(instance_id=f"{self.workflow_id()}-named")
        if mode == "named":
            handle = dw.start_child(ChildEcho, options, 5)
            return [handle.id(), handle.result()]
        if mode == "taken":
            dw.child(ChildEcho, options, 1)
            try:
                dw.start_child(ChildEcho, options, 2)
            except dw.WorkflowAlreadyStartedError as exc:
                return [exc.outcome, exc.reason]
        raise ValueError(mode)


class Messenger(Workflow):
    """Signals or cancels another workflow through ``dw.external_workflow``."""

    type_key = "tests.patterns.messenger"

    def handle(self, target: str, mode: str) -> Any:
        other = dw.external_workflow(target)
        if mode == "signal":
            other.signal("approved-by", "a workflow")
            return "sent"
        if mode == "attempt-signal":
            result = other.attempt_signal("approved-by", "a workflow")
            return [result.accepted, result.outcome, result.rejection_reason]
        if mode == "cancel":
            other.cancel("not needed")
            return "cancel requested"
        if mode == "attempt-cancel":
            result = other.attempt_cancel("not needed")
            return [result.accepted, result.outcome, result.rejection_reason]
        if mode == "raises":
            try:
                other.signal("approved-by", "too late")
            except dw.CommandRejected as exc:
                return [exc.outcome, exc.reason]
        raise ValueError(mode)


class Deferred(dw.Activity):
    """Hands its task token out (through the Invocation table) and completes later."""

    type_key = "tests.patterns.deferred"

    def handle(self, order: str) -> Any:
        from tests.testapp.models import Invocation

        info = dw.activity_info()
        assert info.task_token == self.task_token()
        Invocation.objects.create(
            name=f"deferred:{order}", key=info.task_token, attempt=info.attempt
        )
        if order.startswith("self-"):  # reported before handle() even returns
            dw.activity_completion(self.task_token()).complete("fast")
        raise dw.CompleteAsync()


class AwaitsOutsideWork(Workflow):
    type_key = "tests.patterns.awaits-outside-work"

    def handle(self, order: str, timeout: int | None = None, attempts: int = 1) -> Any:
        options = dw.ActivityOptions(start_to_close_timeout=timeout, max_attempts=attempts)
        try:
            return dw.activity(Deferred, options, order)
        except dw.ActivityFailed as exc:
            return {"failed": exc.message, "type": exc.exception_type}


class ReportsInfo(dw.Activity):
    type_key = "tests.patterns.reports-info"
    tries = 2

    def backoff(self) -> list[int]:
        return [0]

    def handle(self, fail_first: bool) -> dict[str, Any]:
        info = dw.activity_info()
        if fail_first and info.attempt == 1:
            self.heartbeat({"message": "half way", "current": 5, "total": 10})
            raise RuntimeError("first attempt fails")
        return {
            "activity_id": info.activity_id == self.activity_id(),
            "type": info.activity_type,
            "attempt": info.attempt,
            "workflow": [info.workflow_instance_id, info.workflow_type],
            "previous_heartbeat": dict(info.heartbeat_details or {}),
            "times": [info.scheduled_at is not None, info.started_at is not None],
            "token": info.task_token is not None,
        }


class Introspects(Workflow):
    """Reads ``dw.info()`` before and after an upsert, and from an activity and a child."""

    type_key = "tests.patterns.introspects"

    def handle(self, mode: str = "top") -> dict[str, Any]:
        first = dw.info()
        if mode == "child":
            return {"parent": [first.parent_instance_id, first.parent_run_id]}
        dw.upsert_memo({"stage": "after"})
        child = dw.child(Introspects, "child")
        after = dw.info()
        return {
            "ids": [first.instance_id, first.run_id, first.run_number, first.workflow_type],
            "started_at": first.started_at.isoformat() if first.started_at else None,
            "task_attempt": first.task_attempt,
            "lengths": [first.history_length, after.history_length],
            "memo": [dict(first.memo), dict(after.memo)],
            "queue": first.queue,
            "activity": dw.activity(ReportsInfo, True),
            "child_parent": child["parent"],
            "run_id": self.run_id(),
        }


class ExposedOutsideWork(AwaitsOutsideWork):
    """``AwaitsOutsideWork`` reachable through the webhooks."""

    type_key = "tests.patterns.exposed-outside-work"
    webhook = True


class ShortNaps(Workflow):
    """Sleeps ``count`` times for ``seconds`` (fractions included); returns the time it took."""

    type_key = "tests.patterns.short-naps"

    def handle(self, seconds: float, count: int = 1) -> float:
        began = dw.now()
        for _ in range(count):
            dw.timer(seconds)
        return (dw.now() - began).total_seconds()


class UsesChildren(Workflow):
    """A parent whose children tests replace with mocks."""

    type_key = "tests.patterns.uses-children"

    def handle(self) -> Any:
        from tests.testapp.composition import ChildEcho

        first = dw.child(ChildEcho, 1)
        handle = dw.start_child(ChildEcho, 2)
        try:
            second = handle.result()
        except dw.ChildWorkflowFailed as exc:
            second = f"failed: {exc.message}"
        return [first, second]


class Guarded(Workflow):
    """Update handlers that wait on timers, kept apart by ``dw.Lock`` or ``dw.Semaphore``."""

    type_key = "tests.patterns.guarded"

    def __init__(self) -> None:
        self.lock = dw.Lock()
        self.pair = dw.Semaphore(2)
        self.log: list[str] = []
        self.opened: list[str] = []
        self.done = False

    @dw.update("locked")
    def locked(self, tag: str) -> str:
        with self.lock:
            self.log.append(f"{tag}:in")
            dw.timer(1)
            self.log.append(f"{tag}:out")
        return tag

    @dw.update("paired")
    def paired(self, tag: str) -> str:
        with self.pair:
            self.log.append(f"{tag}:in")
            dw.timer(1)
            self.log.append(f"{tag}:out")
        return tag

    @dw.update("gated")
    def gated(self, tag: str) -> str:
        """Holds the lock until the ``open`` update lets ``tag`` out."""
        with self.lock:
            self.log.append(f"{tag}:in")
            dw.wait(lambda: tag in self.opened)
            self.log.append(f"{tag}:out")
        return tag

    @dw.update("gated-pair")
    def gated_pair(self, tag: str) -> str:
        """Holds one of the semaphore's two permits until ``open`` lets ``tag`` out."""
        with self.pair:
            self.log.append(f"{tag}:in")
            dw.wait(lambda: tag in self.opened)
            self.log.append(f"{tag}:out")
        return tag

    @dw.update("open")
    def open(self, tag: str) -> None:
        self.opened.append(tag)

    @dw.update("finish")
    def finish(self) -> bool:
        self.done = True
        return self.lock.locked()

    def handle(self, wait_for_handlers: bool = True) -> list[str]:
        dw.wait(lambda: self.done)
        if wait_for_handlers:
            dw.wait(dw.all_handlers_finished)
        return self.log
