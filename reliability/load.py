"""The client side of the workload: starts ``Order`` workflows at a steady rate and sends
each its signal, retrying through faults as an application would.

A start retried after an error the client saw may meet its own first attempt
(``WorkflowAlreadyStartedError``): that start went through. A signal retried the same
way may arrive twice; the workflow takes the first, so outputs stay checkable.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import threading
import time
from typing import Any

from reliability.workflows import SIGNAL, Order, signal_token


@dataclasses.dataclass(frozen=True)
class Shape:
    """Arguments of ``Order`` after ``n`` (see ``reliability.workflows``)."""

    steps: int = 4
    timer_seconds: int = 2
    fan: int = 4
    child: bool = True
    #: A long activity first (0: none), heartbeating every second or not.
    slow_seconds: int = 0
    slow_heartbeats: bool = True

    def arguments(self, n: int) -> list[Any]:
        shape = [self.steps, self.timer_seconds, self.fan, self.child]
        return [n, *shape, self.slow_seconds, self.slow_heartbeats]


@dataclasses.dataclass(frozen=True)
class Workload:
    count: int
    #: Starts are spread evenly over this many seconds (so faults meet work in flight).
    spread_seconds: float
    shape: Shape = Shape()
    #: Optional per-workflow shapes (``n -> Shape``), e.g. the soak's mix.
    shape_of: Any = None
    prefix: str = "order"

    def shape_for(self, n: int) -> Shape:
        return self.shape_of(n) if self.shape_of is not None else self.shape

    def instance_id(self, n: int) -> str:
        return f"{self.prefix}-{n}"


class Load:
    """Runs a workload in two threads (starts, signals) until every call went through."""

    def __init__(self, workload: Workload, *, seed: int, give_up_after: float) -> None:
        self.workload = workload
        self.rng = random.Random(seed)
        self.give_up_after = give_up_after
        self.client_errors: collections.Counter[str] = collections.Counter()
        self.unsent: list[str] = []
        self.started_at: dict[int, float] = {}
        self._signals: list[tuple[float, int]] = []
        self._cond = threading.Condition()
        self._starts_done = False
        self._threads = [
            threading.Thread(target=self._start_all, name="starts", daemon=True),
            threading.Thread(target=self._signal_all, name="signals", daemon=True),
        ]

    def begin(self) -> None:
        for thread in self._threads:
            thread.start()

    def done(self) -> bool:
        return not any(thread.is_alive() for thread in self._threads)

    def join(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.done()

    # ------------------------------------------------------------------ threads
    def _start_all(self) -> None:
        w = self.workload
        began = time.monotonic()
        try:
            for n in range(w.count):
                time.sleep(max(0.0, began + n * w.spread_seconds / w.count - time.monotonic()))
                if self._call(lambda n=n: self._start(n), f"start {w.instance_id(n)}"):
                    self.started_at[n] = time.time()
                    with self._cond:
                        self._signals.append((time.monotonic() + self.rng.uniform(0, 3), n))
                        self._cond.notify()
        finally:
            with self._cond:
                self._starts_done = True
                self._cond.notify()

    def _start(self, n: int) -> None:
        from durable_workflow import WorkflowAlreadyStartedError, WorkflowStub

        # WorkflowAlreadyStartedError: an earlier attempt went through before the client
        # saw an error.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            WorkflowStub.make(Order, self.workload.instance_id(n)).start(
                *self.workload.shape_for(n).arguments(n)
            )

    def _signal_all(self) -> None:
        from durable_workflow import WorkflowStub

        while True:
            with self._cond:
                while not self._signals and not self._starts_done:
                    self._cond.wait(0.5)
                if not self._signals:
                    return
                due, n = min(self._signals)
                self._signals.remove((due, n))
            time.sleep(max(0.0, due - time.monotonic()))
            instance_id = self.workload.instance_id(n)
            self._call(
                lambda i=instance_id, n=n: WorkflowStub.load(i).signal(SIGNAL, signal_token(n)),
                f"signal {instance_id}",
            )

    def _call(self, fn: Any, what: str) -> bool:
        """Call ``fn`` until it succeeds (the database or broker may be down meanwhile)."""
        from django.db import connection

        deadline = time.monotonic() + self.give_up_after
        while True:
            try:
                fn()
                return True
            except Exception as exc:
                self.client_errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                connection.close()  # a broken connection is not used again
                if time.monotonic() > deadline:
                    self.unsent.append(what)
                    return False
                time.sleep(0.5)
