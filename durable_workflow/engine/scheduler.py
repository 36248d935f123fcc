"""The greenlet scheduler: a run's body, its branches and handlers, run one at a time.

The scheduler knows nothing of history. It owns the greenlets of one run, the
FIFO queue of those ready to go on, and what each blocked greenlet waits on
(one ``Future``, or several for ``all()`` / ``select()``). Its contract:

* ``run_ready()`` switches to ready greenlets in the order they became ready,
  each until it blocks or finishes; when the queue is empty it asks
  ``on_idle()`` (open condition waits) whether anything became ready again;
* ``resolve(future)`` wakes the future's waiters (appended to the queue in the
  order they started waiting); a waiter of several futures re-inspects them;
* a failure raised into a greenlet is remembered with its step; once that
  greenlet runs on without letting it escape, ``on_handled(step, error)`` is
  told (the runtime records ``FailureHandled``);
* ``fail_fatally(error)`` unwinds the calling greenlet and makes ``error``
  leave ``run_ready()``: nothing of the task is kept.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import deque
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import greenlet

from durable_workflow.engine.asyncguard import refuse_async_caller
from durable_workflow.exceptions import DurableWorkflowError, QueryCommandError


class Abort(BaseException):
    """Unwinds a body after a fatal engine error; never seen by user code."""


class BodyGreenlet(greenlet.greenlet):
    """A greenlet running workflow code: the body, a branch, a handler or a predicate."""

    #: The runtime whose code this greenlet runs (read by ``current_runtime()``).
    dw_runtime: object = None
    #: The exception that escaped this greenlet's code, if one did.
    dw_error: BaseException | None = None
    #: True while guarded calls are let through (``guards.allowed()``).
    dw_allowed: bool = False


class Future:
    """The pending outcome of one durable operation or branch."""

    __slots__ = ("done", "error", "order", "step", "value", "waiters")

    def __init__(self, step: int = 0) -> None:
        self.step = step
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.order = 0  # position in the scheduler's resolution sequence
        self.waiters: list[greenlet.greenlet] = []


T = TypeVar("T")
Ready = tuple[greenlet.greenlet, Any, BaseException | None]


class Scheduler:
    """Runs one run's greenlets deterministically (see the module docstring)."""

    def __init__(
        self,
        owner: object,
        *,
        on_handled: Callable[[int, BaseException], None],
        on_idle: Callable[[], bool],
    ) -> None:
        self._owner = owner
        self._on_handled = on_handled
        #: Asked when no greenlet is ready: True if it made one ready (a condition held).
        self.on_idle = on_idle
        self.hub: greenlet.greenlet | None = None
        self._greenlets: list[BodyGreenlet] = []
        self._ready: deque[Ready] = deque()
        # What each blocked greenlet waits on; several futures for all()/select().
        self._waiting: dict[greenlet.greenlet, tuple[list[Future], bool]] = {}
        # Failures raised into a greenlet, per greenlet: (step, exception). Once the
        # greenlet runs on without letting one escape, it was handled.
        self._thrown: dict[greenlet.greenlet, list[tuple[int, BaseException]]] = {}
        #: Greenlets running a predicate or a query: they may not take durable steps.
        self.restricted: set[greenlet.greenlet] = set()
        self._resolutions = 0
        self.fatal: BaseException | None = None
        self.unwinding = False

    # ------------------------------------------------------------ greenlets
    @property
    def main(self) -> BodyGreenlet | None:
        """The body's greenlet (the first one spawned)."""
        return self._greenlets[0] if self._greenlets else None

    @property
    def idle(self) -> bool:
        return not self._ready

    def enter(self) -> None:
        """Make the calling greenlet the hub that suspended greenlets return to."""
        self.hub = hub = greenlet.getcurrent()
        for gr in self._greenlets:
            if not gr.dead:
                gr.parent = hub

    def spawn(self, fn: Callable[..., Any], *args: Any) -> BodyGreenlet:
        gr = BodyGreenlet(fn, parent=self.hub)
        gr.dw_runtime = self._owner
        # Workflow code sees the context variables of the task that started it (the
        # run's log fields, ``durable_workflow.logs``); a new greenlet's are empty.
        gr.gr_context = contextvars.copy_context()
        self._greenlets.append(gr)
        self._ready.append((gr, args, None))
        return gr

    def run_ready(self) -> None:
        """Run every ready greenlet, FIFO, until none is ready and no condition holds."""
        ready = self._ready
        while True:
            while ready:
                gr, value, error = ready.popleft()
                if gr.dead:
                    continue
                if error is not None:
                    gr.throw(error)
                elif not gr:  # not started yet: ``value`` holds the call arguments
                    gr.switch(*value)
                else:
                    gr.switch(value)
                if self._thrown:
                    self._after_switch(gr)
                if self.fatal is not None:
                    raise self.fatal
            if not self.on_idle():
                return

    def _after_switch(self, gr: greenlet.greenlet) -> None:
        thrown = self._thrown.pop(gr, None)
        if not thrown:
            return
        escaped = getattr(gr, "dw_error", None)
        for step, exc in thrown:
            if exc is not escaped and step:
                self._on_handled(step, exc)

    def call_restricted(self, fn: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        """Call ``fn`` on a greenlet that may not take durable steps: (value, error)."""
        outcome: list[Any] = [None, None]

        def call() -> None:
            try:
                outcome[0] = fn()
            except BaseException as exc:
                outcome[1] = exc

        gr = BodyGreenlet(call, parent=greenlet.getcurrent())
        gr.dw_runtime = self._owner
        gr.gr_context = contextvars.copy_context()
        self.restricted.add(gr)
        try:
            gr.switch()
        finally:
            self.restricted.discard(gr)
        if self.fatal is not None:
            raise self.fatal
        return outcome[0], outcome[1]

    def check_may_step(self, asked: T, describe: Callable[[T], str]) -> None:
        """Refuse a durable step while unwinding or from a restricted greenlet.

        Callers on a hot path test ``unwinding or restricted`` first (cheaper than a call).
        """
        if self.unwinding:
            raise greenlet.GreenletExit()
        if self.restricted and greenlet.getcurrent() in self.restricted:
            raise QueryCommandError(
                "queries and wait predicates may only read workflow state; they cannot "
                f"call durable helpers (asked for {describe(asked)})"
            )

    # ---------------------------------------------------------------- futures
    def resolve(
        self, future: Future, *, value: Any = None, error: BaseException | None = None
    ) -> None:
        self._resolutions += 1
        future.done, future.value, future.error = True, value, error
        future.order = self._resolutions
        for gr in future.waiters:
            waited, multi = self._waiting.pop(gr, ([future], False))
            for other in waited:
                if other is not future and gr in other.waiters:
                    other.waiters.remove(gr)
            if multi:
                self._ready.append((gr, None, None))  # the waiter re-inspects its futures
            else:
                self._ready.append((gr, value, error))
        future.waiters.clear()

    def wait(self, future: Future) -> Any:
        """The future's value (suspending until it resolves), or its failure raised."""
        if not future.done:
            refuse_async_caller("waiting on a durable operation")
            gr = greenlet.getcurrent()
            future.waiters.append(gr)
            self._waiting[gr] = ([future], False)
            assert self.hub is not None
            try:
                return self.hub.switch()
            except BaseException as exc:
                if exc is future.error:
                    self._thrown.setdefault(gr, []).append((future.step, exc))
                raise
        if future.error is not None:
            self.raise_into_body(future.step, future.error)
        return future.value

    def wait_any(self, futures: list[Future]) -> None:
        """Block until at least one of ``futures`` is resolved (returns at once if one is)."""
        if any(f.done for f in futures):
            return
        refuse_async_caller("waiting on durable operations")
        gr = greenlet.getcurrent()
        for future in futures:
            future.waiters.append(gr)
        self._waiting[gr] = (futures, True)
        assert self.hub is not None
        self.hub.switch()

    def raise_into_body(self, step: int, error: BaseException) -> NoReturn:
        """Raise a step's failure in the current greenlet, remembering it for FailureHandled."""
        self._thrown.setdefault(greenlet.getcurrent(), []).append((step, error))
        raise error

    def interrupt_main(self, error: BaseException) -> list[Future]:
        """Raise ``error`` in the body where it waits; returns the futures it gave up."""
        main = self.main
        if main is None or main.dead:
            return []
        waited, _ = self._waiting.pop(main, ([], False))
        for future in waited:
            if main in future.waiters:
                future.waiters.remove(main)
            future.done = True  # a wait the body will never come back to
        self._ready.append((main, None, error))
        return waited

    # ---------------------------------------------------------------- endings
    @staticmethod
    def escaped(error: BaseException) -> None:
        """Note that ``error`` escaped the current greenlet's code (it was not handled)."""
        gr = greenlet.getcurrent()
        if isinstance(gr, BodyGreenlet):  # workflow code runs on nothing else
            gr.dw_error = error

    def fail_fatally(self, error: BaseException) -> NoReturn:
        """Stop the task: ``error`` leaves ``run_ready`` and nothing is persisted."""
        self.fatal = error
        raise Abort()

    def dispose(self) -> None:
        """Unwind every suspended greenlet deliberately (runs user finally blocks)."""
        self.unwinding = True
        hub = greenlet.getcurrent()
        for gr in self._greenlets:
            if not gr.dead:
                gr.parent = hub
                with contextlib.suppress(DurableWorkflowError, Abort):
                    gr.throw(greenlet.GreenletExit())
        self._greenlets.clear()
