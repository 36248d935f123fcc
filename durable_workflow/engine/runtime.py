"""The replay runtime: runs a workflow body in greenlets against its history.

One ``WorkflowRuntime`` exists per run being executed. The executor feeds it
history events (the whole log on a cold start, only the new tail when a warm
runtime is reused) and collects the commands the body issued that history did
not already hold.

Rules (see docs/explanation/replay.md):

* every durable helper call takes the next *step* number; a step recorded in
  history must be asked for again with the same kind and name, otherwise the
  task fails with ``NonDeterminismError`` and nothing is written;
* inputs from outside the body (activity results, timer fires, signals,
  updates) are delivered one at a time in history order; after each delivery
  every ready greenlet runs, FIFO, until it blocks or finishes, and pending
  condition predicates are re-checked; once the body has decided how the run
  ends (returned, failed, continued as new) nothing more is delivered, so an
  input recorded after that point stays unconsumed (and moves to the next run
  on continue-as-new);
* inline steps (side effects, zero-length timers, waits that are already
  satisfied) resolve at the moment the body reaches them;
* facts the body produces along the way (a failure it handled, a signal it
  consumed, an update it applied) are recorded once and recognised on replay.

The runtime is a facade over its parts (docs/explanation/architecture.md): the
``DeterminismLedger`` (history, step by step), the ``Scheduler`` (greenlets),
the ``OperationTable`` (one record per durable operation), the ``Outbox``
(what the task produces) and the features built on them (steps, groups,
waits, inbox, streams, versions). This module only routes history events to
them and runs the body's outermost frame.
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

import greenlet

from durable_workflow import interceptors
from durable_workflow.codec import envelope
from durable_workflow.converter import handle_signature
from durable_workflow.engine import failures, gcpause
from durable_workflow.engine.asyncguard import refuse_awaitable
from durable_workflow.engine.calls import Collector
from durable_workflow.engine.children import Children
from durable_workflow.engine.commands import (
    CancelWorkflow,
    CloseCommand,
    Command,
    CompleteWorkflow,
    ContinueAsNew,
    RecordFailureHandled,
)
from durable_workflow.engine.core import Core
from durable_workflow.engine.events import (
    MESSAGE_EVENTS,
    OUTCOME_COMMAND_EVENTS,
    RESOLUTION_EVENTS,
    EventType,
    HistoryEvent,
)
from durable_workflow.engine.groups import Groups
from durable_workflow.engine.inbox import Inbox
from durable_workflow.engine.ledger import DeterminismLedger
from durable_workflow.engine.limits import StructuralLimits
from durable_workflow.engine.operations import ChildOp, OperationTable, WaitOp
from durable_workflow.engine.outbox import ContinueAsNewRequested, LocalRequest, Outbox
from durable_workflow.engine.payloads import Payloads
from durable_workflow.engine.runinfo import workflow_info
from durable_workflow.engine.scheduler import Abort, Scheduler
from durable_workflow.engine.steps import Steps
from durable_workflow.engine.streams import Streams
from durable_workflow.engine.sync import Permits
from durable_workflow.engine.versions import Versions
from durable_workflow.engine.waits import Waits
from durable_workflow.exceptions import NonDeterminismError, WorkflowCancelled
from durable_workflow.headers import stored
from durable_workflow.info import WorkflowInfo
from durable_workflow.text import text_of


class WorkflowRuntime:
    """Executes one run's body deterministically against its history."""

    def __init__(
        self,
        *,
        factory: Callable[[], Any],
        workflow_id: str,
        run_id: str,
        codec: str = envelope.DEFAULT_CODEC,
        workflow_class: type | None = None,
    ) -> None:
        self.workflow_id = workflow_id
        #: Its ``handle()`` annotations type the start arguments.
        self.workflow_class = workflow_class
        self.run_id = run_id
        self.codec = codec
        #: The workflow instance, once the body built it.
        self.instance: Any = None
        #: Events the executor recorded after the last feed (its next feed may use
        #: them instead of reading them back).
        self.unfed: list[HistoryEvent] = []
        self._factory = factory
        self._cancel_reason: str | None = None
        #: The headers the run started with (``WorkflowStarted``).
        self.start_headers: dict[str, str] = {}
        self._cancel_requested = False
        #: The attempt of the workflow task feeding this runtime (set by the executor).
        self.task_attempt = 1
        #: The last event an earlier workflow task fed the body (set by the executor
        #: before each feed): what the body does for events up to it is replay. Left at
        #: its default, everything is (a query, a test replayer).
        self.replayed_through = sys.maxsize
        #: The newest local outcome that woke a waiting body before this feed's events
        #: are applied (0 otherwise): what the body does then answers that outcome.
        self._waking = 0
        #: Events fed after the body decided how the run ends (never delivered).
        self._not_delivered: list[HistoryEvent] = []
        ledger = self._ledger = DeterminismLedger()
        scheduler = self._scheduler = Scheduler(
            self, on_handled=self._failure_handled, on_idle=lambda: False
        )
        outbox = self._outbox = Outbox(ledger)
        self._policy = failures.FailurePolicy(self._instance)
        core = self._core = Core(
            ledger, scheduler, OperationTable(), outbox, Payloads(codec), self._policy
        )
        self._parts(core)

    def _parts(self, core: Core) -> None:
        """Build the features, and expose the body-facing API as their bound methods."""
        collector = Collector()
        self._limits = limits = StructuralLimits(core.ops, core.outbox, self.run_id)
        self._waits = waits = Waits(core)
        core.scheduler.on_idle = waits.check_conditions  # open conditions, re-checked
        self._steps = steps = Steps(core, collector, limits, waits)
        children = Children(core, steps, limits, self.run_id)
        groups = Groups(core, collector, limits, waits)
        self._inbox = Inbox(core, waits, self._instance)
        self._streams = streams = Streams(core, self.run_id)
        versions = Versions(core, self._instance)
        # Called from body code (durable_workflow.authoring forwards to these).
        self.schedule_activity = steps.schedule_activity
        self.schedule_local_activity = steps.schedule_local_activity
        self.start_child = children.start
        self.child_result = children.result
        self.children = children.started
        self.signal_workflow = children.signal
        self.cancel_workflow = children.cancel
        self.timer = steps.timer
        self.side_effect = steps.side_effect
        self.upsert_visibility = steps.upsert_visibility
        self.wait_signal = steps.wait_signal
        self.wait_condition = steps.wait_condition
        self.run_call = steps.run_call
        self.run_all = groups.run_all
        self.run_select = groups.run_select
        self.start_branch = groups.start_branch
        self.get_version = versions.get_version
        self.permits = functools.partial(Permits, core.scheduler)  # dw.Lock / dw.Semaphore
        self.all_handlers_finished = self._inbox.all_finished
        self.stream_pending = streams.pending
        self.stream_cursor = streams.cursor
        self.stream_receive = streams.receive
        self.stream_send = streams.send
        self.history_length = core.ledger.history_length
        self.history_size = core.ledger.history_size
        self.fail_fatally = core.fail_fatally

    def _instance(self) -> Any:
        return self.instance

    # --------------------------------------------------------- executor's view
    @property
    def failure_types(self) -> tuple[type | str, ...]:
        """The deployment's ``FAILURE_EXCEPTION_TYPES`` (the executor sets them)."""
        return self._policy.deployment

    @failure_types.setter
    def failure_types(self, declared: tuple[type | str, ...]) -> None:
        self._policy.deployment = tuple(declared)

    @property
    def last_sequence(self) -> int:
        return self._ledger.last_sequence

    @property
    def step_count(self) -> int:
        return self._ledger.step

    @property
    def closed(self) -> CloseCommand | None:
        """How the body ended, if it did (the executor may also close the run itself)."""
        return self._outbox.closed

    @closed.setter
    def closed(self, command: CloseCommand | None) -> None:
        self._outbox.closed = command

    @property
    def local_requests(self) -> list[LocalRequest]:
        """Local activity attempts to run before the body can go on, in step order."""
        return self._outbox.local_requests

    @local_requests.setter
    def local_requests(self, requests: list[LocalRequest]) -> None:
        self._outbox.local_requests = requests

    @property
    def limits(self) -> dict[str, int]:
        """Structural limits and the history budget (set by the executor)."""
        return self._limits.configured

    @limits.setter
    def limits(self, configured: dict[str, int]) -> None:
        self._limits.configured = configured

    def take_commands(self) -> list[Command]:
        """The new commands issued since the last call, in issue order."""
        return self._outbox.take_commands()

    def unfinished_updates(self) -> list[tuple[str, str, bool]]:
        """Updates the closing run leaves open: (update id, name, whether its handler
        started). The executor fails them (or carries those not started to the next run)."""
        return self._inbox.unfinished_updates(self._not_delivered)

    def take_refeed(self) -> bool:
        """True when the body waits for outcomes recorded with the commands just taken:
        the executor feeds their events back in the same workflow task."""
        return self._outbox.take_refeed()

    @property
    def replaying(self) -> bool:
        """True while the body redoes what an earlier workflow task already did: its
        commands are recognised from history, nothing new happens."""
        position = max(self._ledger.last_sequence, self._waking)
        return self._outbox.query_mode or position <= self.replayed_through

    def enter_query_mode(self) -> None:
        """Replay without producing commands (queries and update validators)."""
        self._outbox.query_mode = True

    # ----------------------------------------------------------------- feeding
    def feed(self, events: Iterable[HistoryEvent]) -> None:
        """Apply history events not seen yet, then run the body to quiescence."""
        try:
            self._feed(events)
        except NonDeterminismError as divergence:
            self.explain(divergence)
            raise

    def explain(self, divergence: NonDeterminismError) -> None:
        """Add the steps history recorded before the divergence to its message."""
        divergence.explain(recent_steps=self._ledger.steps_before(divergence.step))

    def _feed(self, events: Iterable[HistoryEvent]) -> None:
        last = self._ledger.last_sequence
        fresh = [e for e in events if e.sequence > last]
        if not fresh:
            return
        with gcpause.paused_for(len(fresh)):
            self._feed_fresh(fresh)

    def _feed_fresh(self, fresh: list[HistoryEvent]) -> None:
        ledger, scheduler = self._ledger, self._scheduler
        scheduler.enter()
        for outcome in ledger.index(fresh):
            if self._local_outcome_found(outcome):
                self._waking = max(self._waking, outcome.sequence)
        run_ready, seen, apply, outbox = scheduler.run_ready, ledger.seen, self._apply, self._outbox
        try:
            run_ready()  # bodies unblocked by local outcomes found while indexing
        finally:
            self._waking = 0
        for index, event in enumerate(fresh):
            if outbox.closed is not None:
                # The body decided how the run ends: later inputs are not consumed here
                # (on continue-as-new the executor carries them to the next run).
                self._not_delivered = fresh[index:]
                break
            seen.append(event)
            apply(event)
            ledger.last_sequence = event.sequence
            run_ready()
        if scheduler.fatal is None and scheduler.idle:
            ledger.check_all_reached()

    def _local_outcome_found(self, event: HistoryEvent) -> bool:
        op = self._core.ops.get(event.step or 0)
        if op is not None and not op.future.done:
            self._steps.settle_local(op, event)
            return True
        return False

    def _apply(self, event: HistoryEvent) -> None:
        kind = event.event_type
        if kind in RESOLUTION_EVENTS:
            if not event.payload.get("local_activity"):  # local outcomes resolve inline
                self._deliver(event)
        elif kind in MESSAGE_EVENTS:
            if event.recorded_at is not None:
                self._ledger.now = event.recorded_at
            self._deliver_message(event)
        elif kind == EventType.WORKFLOW_STARTED:
            self._start(event)
        elif kind in OUTCOME_COMMAND_EVENTS:
            self._deliver(event)
        elif kind == EventType.CHILD_RUN_STARTED:
            self._child_started(event)
        elif kind == EventType.CANCEL_REQUESTED:
            if event.recorded_at is not None:
                self._ledger.now = event.recorded_at
            self._deliver_cancel(event.payload.get("reason"))

    def _start(self, event: HistoryEvent) -> None:
        self._ledger.now = event.recorded_at
        self._ledger.started = event
        self._steps.visibility = {
            kind: dict(event.payload.get(kind) or {}) for kind in ("memo", "search_attributes")
        }
        self._ledger.started_fingerprint = event.payload.get("workflow_definition_fingerprint")
        self.start_headers = stored(event.payload)
        self._streams.cursors.update(event.payload.get("message_cursors") or {})
        # Decoded here, not in the body: a payload that cannot be read (or does not fit
        # handle()'s annotations) fails the workflow task, which a fix can repair.
        args = self._core.payloads.decode_arguments(
            event.payload["arguments"], handle_signature(self.workflow_class)
        )
        self._scheduler.spawn(self._main, *args)

    def _child_started(self, event: HistoryEvent) -> None:
        step, run_id = int(event.payload["sequence"]), str(event.payload["child_workflow_run_id"])
        self._ledger.note_child_run(step, run_id)
        op = self._core.ops.get(step)
        if isinstance(op, ChildOp) and not op.started.done:
            self._scheduler.resolve(op.started, value=run_id)

    def _deliver(self, event: HistoryEvent) -> None:
        """An outcome recorded in history settles the operation at its step."""
        step = event.step
        assert step is not None
        op = self._core.ops.get(step)
        if op is None:
            raise self._ledger.never_reached(step, event)
        if op.future.done:
            return  # resolved inline, or a wait whose other branch already won
        if event.recorded_at is not None:
            self._ledger.now = event.recorded_at
        if event.event_type == EventType.TIMER_FIRED and isinstance(op, WaitOp):
            self._waits.timed_out(op)
            return
        value, error = op.settle(event, self._core.payloads.decode_result)
        self._scheduler.resolve(op.future, value=value, error=error)
        if isinstance(op, ChildOp) and not op.started.done:  # refused before it started
            self._scheduler.resolve(op.started, error=error)

    def _deliver_message(self, event: HistoryEvent) -> None:
        if event.event_type == EventType.SIGNAL_RECEIVED:
            self._inbox.deliver_signal(event.payload)
        elif event.event_type == EventType.MESSAGE_RECEIVED:
            self._streams.deliver(event.payload)
        else:
            self._inbox.deliver_update(event.payload)

    def _deliver_cancel(self, reason: str | None) -> None:
        """Raise ``WorkflowCancelled`` in the body where it waits (once)."""
        if self._cancel_requested:
            return
        self._cancel_requested, self._cancel_reason = True, reason
        error = WorkflowCancelled(reason or "the workflow was cancelled")
        for future in self._scheduler.interrupt_main(error):
            op = self._core.ops.owner_of(future)
            if isinstance(op, WaitOp):
                self._waits.forget(op)

    # ------------------------------------------------------ scheduler's hooks
    def _failure_handled(self, step: int, error: BaseException) -> None:
        """Workflow code caught a step's failure and ran on: record that once."""
        self._outbox.mark(
            ("handled", step),
            RecordFailureHandled(
                step=step,
                exception_type=text_of(
                    getattr(error, "exception_type", "") or type(error).__name__
                ),
                message=text_of(error),
            ),
        )

    # ------------------------------------------------------------------ body
    def _main(self, *args: Any) -> None:
        outbox = self._outbox
        try:
            self.instance = self._factory()
            result = interceptors.call(
                "handle_workflow",
                interceptors.HandleWorkflowInput(
                    self.instance, list(args), dict(self.start_headers)
                ),
                _run_handle,
            )
            refuse_awaitable(result)
            if outbox.closed is None:
                outbox.closed = (
                    CancelWorkflow(reason=self._cancel_reason)
                    if self._cancel_requested
                    else CompleteWorkflow(result=self._core.payloads.encode(result, "result"))
                )
        except Abort:
            return
        except ContinueAsNewRequested as request:
            if outbox.closed is None:
                outbox.closed = ContinueAsNew(
                    arguments=request.arguments,
                    message_cursors=dict(self._streams.cursors),
                    headers=dict(self.start_headers),
                )
        except greenlet.GreenletExit:
            raise
        except WorkflowCancelled:
            outbox.close(CancelWorkflow(reason=self._cancel_reason))
        except BaseException as exc:  # the body failed: that is an outcome
            self._core.body_failed(exc)

    def now(self) -> dt.datetime:
        assert self._ledger.now is not None
        return self._ledger.now

    def continue_as_new(self, arguments: list[Any]) -> None:
        if greenlet.getcurrent() is not self._scheduler.main:
            raise TypeError("continue_as_new() can only be called from the workflow body")
        # Encoded here, so a refused value fails at the call, where the body can see it.
        raise ContinueAsNewRequested(self._core.payloads.encode_arguments(arguments))

    def should_continue_as_new(self) -> bool:
        events = self.limits.get("continue_as_new_event_threshold", 10_000)
        size = self.limits.get("continue_as_new_size_threshold", 5 * 1024 * 1024)
        return bool(events and self.history_length() >= events) or bool(
            size and self.history_size() >= size
        )

    def info(self) -> WorkflowInfo:
        """``dw.info()``: the run as of the point of history the body has reached."""
        return workflow_info(
            self._ledger,
            self._steps.visibility,
            workflow_id=self.workflow_id,
            run_id=self.run_id,
            task_attempt=self.task_attempt,
            headers=self.start_headers,
        )

    def child_run_id(self, step: int) -> str | None:
        """The run id of the child started at ``step``, once history says it started."""
        return self._ledger.child_run_id(step)

    def query(self, method: Callable[..., Any], args: list[Any]) -> Any:
        """Call a query method on the replayed instance; durable helpers are refused."""
        self._outbox.query_mode = True
        self._scheduler.hub = greenlet.getcurrent()
        value, error = self._scheduler.call_restricted(lambda: method(*args))
        if error is not None:
            raise error
        return value

    def dispose(self) -> None:
        """Unwind every suspended greenlet deliberately (runs user finally blocks)."""
        self._scheduler.dispose()


def _run_handle(input: interceptors.HandleWorkflowInput) -> Any:
    """The innermost link of ``handle_workflow``: the body itself."""
    return input.workflow.handle(*input.args)


def current_runtime() -> WorkflowRuntime | None:
    """The runtime whose body is executing on this greenlet, if any."""
    runtime = getattr(greenlet.getcurrent(), "dw_runtime", None)
    return runtime if isinstance(runtime, WorkflowRuntime) else None
