"""Workflows for children, all/select, run_async and continue-as-new (imported by workflows.py)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import ActivityOptions, ChildWorkflowOptions, Workflow


def _acts():
    from tests.testapp import workflows

    return workflows


class ChildEcho(Workflow):
    type_key = "tests.child-echo"
    failure_exception_types = ["tests.testapp.workflows.PaymentDeclined"]
    signals = ["poke"]

    def handle(self, value: Any, mode: str = "return") -> Any:
        w = _acts()
        if mode == "fail":
            raise w.PaymentDeclined(f"child refused {value}")
        if mode == "wait":
            return [value, dw.wait_signal("poke")]
        if mode == "sleep":
            dw.timer(3600)
        return {"echo": dw.activity(w.Add, value, 1)}


class Parent(Workflow):
    type_key = "tests.parent"

    def handle(self, mode: str, policy: str = "abandon") -> Any:
        if mode == "simple":
            result = dw.child(ChildEcho, 41)
            handle = self.last_child()
            return {"result": result, "child_id": handle.id(), "run": handle.run_id()}
        if mode == "catch":
            try:
                dw.child(ChildEcho, 1, "fail")
            except _acts().PaymentDeclined as exc:
                return {"caught": str(exc), "child_failed": isinstance(exc, dw.ChildWorkflowFailed)}
        if mode == "cancelled":
            try:
                dw.child(ChildEcho, 1, "sleep")
            except dw.ChildWorkflowTerminated:
                return "child terminated"
            except dw.ChildWorkflowCancelled:
                return "child cancelled"
        if mode == "policy":
            dw.child(ChildEcho, ChildWorkflowOptions(parent_close_policy=policy), 1, "sleep")
        if mode == "policy-async":
            return dw.all(
                [
                    lambda: dw.child(
                        ChildEcho, ChildWorkflowOptions(parent_close_policy=policy), 1, "sleep"
                    ),
                    lambda: dw.timer(5),
                ]
            )
        if mode == "queued-child":
            return dw.child(ChildEcho, ChildWorkflowOptions(queue="children"), 7)
        if mode == "signal-child":
            results = dw.all([lambda: dw.child(ChildEcho, "x", "wait"), lambda: dw.timer(1)])
            return results
        raise ValueError(mode)


class PokeParent(Workflow):
    """Starts a waiting child, then signals it through its handle."""

    type_key = "tests.poke-parent"

    def handle(self) -> Any:
        def start_and_poke():
            return dw.child(ChildEcho, "x", "wait")

        outcome = dw.select({"child": start_and_poke, "deadline": lambda: dw.timer(3600)})
        return outcome.key


class Fanout(Workflow):
    type_key = "tests.fanout"

    def handle(self, count: int, fail_at: int = -1) -> Any:
        w = _acts()
        calls = []
        for index in range(count):
            if index == fail_at:
                calls.append(lambda: dw.activity(w.Flaky, ActivityOptions(max_attempts=1), 99))
            else:
                calls.append(lambda index=index: dw.activity(w.Add, index, 0))
        return dw.all(calls)


class Nested(Workflow):
    type_key = "tests.nested"

    def handle(self, fail: bool = False) -> Any:
        w = _acts()
        inner_fail = (
            (lambda: dw.activity(w.Flaky, ActivityOptions(max_attempts=1), 99))
            if fail
            else (lambda: dw.activity(w.Add, 3, 3))
        )
        try:
            return dw.all(
                [
                    lambda: dw.activity(w.Add, 1, 0),
                    lambda: dw.all([lambda: dw.activity(w.Add, 2, 0), inner_fail]),
                    lambda: dw.child(ChildEcho, 10),
                ]
            )
        except w.PaymentDeclined as exc:
            return f"failed: {exc}"


class Selector(Workflow):
    type_key = "tests.selector"
    signals = ["go"]

    def handle(self, timeout: int) -> Any:
        w = _acts()
        selected = dw.select(
            {
                "work": lambda: dw.activity(w.Add, 20, 22),
                "deadline": lambda: dw.timer(timeout),
                "manual": lambda: dw.wait_signal("go"),
            }
        )
        for key, handle in selected.handles.items():
            if key != selected.key:
                handle.cancel()
        leftovers = []
        for handle in selected.remaining():
            try:
                leftovers.append(handle.wait())
            except dw.DurableOperationCancelled as exc:
                leftovers.append(f"cancelled {exc.operation_kind}")
        return {"winner": selected.key, "value": selected.result(), "others": leftovers}


class AsyncBranches(Workflow):
    type_key = "tests.async-branches"

    def handle(self) -> Any:
        w = _acts()

        def two_steps(start):
            return lambda: dw.run_async(lambda: dw.activity(w.Add, dw.activity(w.Add, start, 1), 1))

        direct = dw.run_async(lambda: dw.activity(w.Add, 100, 1))
        return [direct, dw.all([two_steps(0), two_steps(10)])]


class Looper(Workflow):
    """Continues as new until ``remaining`` runs out; counts signals across runs."""

    type_key = "tests.looper"
    signals = ["tick"]

    def handle(self, remaining: int, ticks: int = 0) -> Any:
        w = _acts()
        ticks += 1 if dw.wait("tick", timeout=3600) else 0
        dw.activity(w.Add, remaining, 0)
        if remaining > 1:
            dw.continue_as_new(remaining - 1, ticks)
        return {"ticks": ticks, "run_id": self.run_id()}


class Budget(Workflow):
    type_key = "tests.budget"

    def handle(self) -> Any:
        w = _acts()
        seen = []
        while not self.should_continue_as_new():
            dw.activity(w.Add, 1, 1)
            seen.append(self.history_length())
        return {"steps": len(seen), "length": self.history_length()}


class Booking(Workflow):
    """A saga: book three things, fail on demand, compensate."""

    type_key = "tests.booking"

    def handle(
        self, fail_step: int, parallel: bool = False, continue_with_error: bool = False
    ) -> Any:
        w = _acts()
        self.set_parallel_compensation(parallel).set_continue_with_error(continue_with_error)
        try:
            for step in (1, 2, 3):
                if step == fail_step:
                    dw.activity(w.Flaky, ActivityOptions(max_attempts=1), 99)
                dw.activity(w.Greet, f"book-{step}")
                self.add_compensation(lambda step=step: dw.activity(w.Greet, f"undo-{step}"))
            if fail_step >= 4:
                if fail_step == 5:  # a compensation that itself fails
                    self.add_compensation(lambda: dw.activity(w.Refuse))
                dw.activity(w.Flaky, ActivityOptions(max_attempts=1), 99)
        except w.PaymentDeclined:
            self.compensate()
            return "compensated"
        return "booked"


class CleanUpEverything(Workflow):
    """Parallel compensation with continue-with-error: one clean-up fails at once, a
    slower one waits a minute first; ``compensate()`` returns after both."""

    type_key = "tests.clean-up-everything"

    def handle(self) -> dict[str, Any]:
        w = _acts()
        self.set_parallel_compensation(True).set_continue_with_error(True)

        def slow_undo() -> None:
            dw.timer(60)
            dw.activity(w.Greet, "undo-slow")

        self.add_compensation(slow_undo)
        self.add_compensation(lambda: dw.activity(w.Refuse))
        self.add_compensation(lambda: dw.activity(w.Greet, "undo-fast"))
        failed = self.compensate()
        return {
            "failed": [getattr(error, "exception_type", "") for error in failed],
            "at": dw.now().isoformat(),
        }


class HandsOverAChild(Workflow):
    """Starts a child (``terminate`` on parent close) that waits for a signal, then
    continues as new; the next run ends at once."""

    type_key = "tests.hands-over-a-child"

    def handle(self, rounds: int, child_id: str = "") -> str:
        if rounds:
            options = ChildWorkflowOptions(parent_close_policy="terminate")
            child = dw.start_child("tests.patterns.waits-for-go", "x", options=options)
            dw.continue_as_new(rounds - 1, child.id())
        return child_id


class PredicateMembers(Workflow):
    """A predicate wait as a member of ``all()`` and of ``select()``, no ``run_async``."""

    type_key = "tests.predicate-members"
    signals = ["go"]

    def __init__(self) -> None:
        self.go = False

    @dw.signal("go")
    def on_go(self) -> None:
        self.go = True

    def handle(self) -> dict[str, Any]:
        first = dw.select({"go": lambda: dw.wait(lambda: self.go), "late": lambda: dw.timer(3600)})
        both = dw.all([lambda: dw.wait(lambda: self.go), lambda: dw.timer(0)])
        return {"select": first.key, "all": both}


class Timeouts(Workflow):
    type_key = "tests.timeouts"

    def handle(self, kind: str) -> Any:
        w = _acts()
        options = {
            "schedule_to_start": ActivityOptions(
                schedule_to_start_timeout=5, max_attempts=2, backoff=[0]
            ),
            "start_to_close": ActivityOptions(
                start_to_close_timeout=5, max_attempts=2, backoff=[0]
            ),
            "schedule_to_close": ActivityOptions(
                schedule_to_close_timeout=5, max_attempts=3, backoff=[0]
            ),
            "heartbeat": ActivityOptions(heartbeat_timeout=5, max_attempts=1),
        }[kind]
        try:
            return dw.activity(w.Add, 1, 1, options=options)
        except dw.ActivityTimeoutError as exc:
            return {"timed_out": exc.timeout_kind}


class LocalSteps(Workflow):
    type_key = "tests.local-steps"

    def handle(self, count: int, mode: str = "plain") -> Any:
        from durable_workflow import LocalActivityOptions

        w = _acts()
        if mode == "retry":
            return dw.local_activity(w.Flaky, LocalActivityOptions(max_attempts=3, backoff=[5]), 2)
        if mode == "sleepy":
            return dw.local_activity(w.Sleepy, 0)
        if mode == "mixed":
            queued = dw.activity(w.Add, 1, 1)
            return [queued, dw.local_activity(w.Add, queued, 1)]
        total = 0
        for index in range(count):
            total = dw.local_activity(w.Add, total, index)
        return total
