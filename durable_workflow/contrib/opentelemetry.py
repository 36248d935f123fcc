"""OpenTelemetry tracing: one workflow is one trace, across processes, restarts and days.

Opt in by listing :class:`TracingInterceptor` in ``DURABLE_WORKFLOW["INTERCEPTORS"]``
(``pip install 'durable-workflow[otel]'``); nothing is traced otherwise. Spans go to
the tracer provider the process configured (the global one unless one is passed).

The trace context travels in headers (W3C ``traceparent`` through the configured
propagator), which the engine stores with what they travel with and hands back on
every later task, whichever worker runs it:

* a client command's span (``StartWorkflow:<type>``, ``SignalWorkflow:<name>``,
  ``SignalWithStartWorkflow:<name>``, ``ArchiveWorkflow:<type>``, ...) is a child of
  the caller's current span, and its context goes into the command's headers; a
  schedule's fire (``ScheduleFire:<schedule id>``) starts the run's trace;
* each workflow task is a short span (``WorkflowTask:<type>``) whose parent is the
  context the run started with: a run waiting for days holds no open span;
* what the body starts for the first time (``StartActivity``, ``StartChildWorkflow``,
  ``StartTimer``, ``FireTimer``, ``SignalExternalWorkflow``, ``HandleSignal``,
  ``HandleUpdate``, ``CompleteWorkflow``) is a zero-length span under the task that did it; the
  activity's and the child's headers carry that span's context, so each activity
  attempt (``RunActivity:<type>``) and the child's tasks hang under it. Replayed
  work emits nothing: the same command replayed after a restart is not traced again.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections.abc import Awaitable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import (
        NonRecordingSpan,
        Span,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
    )
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "durable_workflow.contrib.opentelemetry needs opentelemetry-api: "
        "pip install 'durable-workflow[otel]'"
    ) from exc

from durable_workflow import interceptors as ic
from durable_workflow.engine import guards
from durable_workflow.engine.outbox import ContinueAsNewRequested
from durable_workflow.engine.runtime import current_runtime

WORKFLOW_TYPE = "durable_workflow.workflow.type"
INSTANCE_ID = "durable_workflow.workflow.instance_id"
RUN_ID = "durable_workflow.workflow.run_id"
ACTIVITY_TYPE = "durable_workflow.activity.type"
ACTIVITY_ID = "durable_workflow.activity.id"
ATTEMPT = "durable_workflow.activity.attempt"
RETRY = "durable_workflow.activity.retry"
QUEUE = "durable_workflow.queue"
MESSAGE_NAME = "durable_workflow.message.name"
TASK_ATTEMPT = "durable_workflow.workflow_task.attempt"
TASK_EVENTS = "durable_workflow.workflow_task.events"
TASK_REPLAYED = "durable_workflow.workflow_task.replayed_events"
TASK_REPLAY = "durable_workflow.workflow_task.replay"
TASK_STICKY = "durable_workflow.workflow_task.sticky"
TIMER_SECONDS = "durable_workflow.timer.seconds"
SCHEDULE_ID = "durable_workflow.schedule.id"
SCHEDULE_TRIGGER = "durable_workflow.schedule.trigger_number"
ERROR_TYPE = "error.type"  # OpenTelemetry semantic conventions

_CLIENT_VERBS = {
    "signal_workflow": "SignalWorkflow",
    "update_workflow": "UpdateWorkflow",
    "query_workflow": "QueryWorkflow",
}


class TracingInterceptor(ic.Interceptor):
    """Spans for client commands, workflow tasks, what a body starts, activity attempts.

    ``tracer_provider``: where spans go (default: the global provider, looked up
    when a span starts, so it may be configured after the settings load)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
        self._tasks = threading.local()

    # ------------------------------------------------------------------ client
    def start_workflow(self, input: ic.StartWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        attributes = {WORKFLOW_TYPE: input.workflow_type, INSTANCE_ID: input.instance_id}
        name = f"StartWorkflow:{input.workflow_type}"
        if input.source == "schedule" and input.schedule is not None:
            # A schedule's fire: the root of the run's trace, in the firing process.
            name = f"ScheduleFire:{input.schedule['schedule_id']}"
            attributes[SCHEDULE_ID] = input.schedule["schedule_id"]
            attributes[SCHEDULE_TRIGGER] = input.schedule["trigger_number"]
        with self._client_span(name, attributes) as span:
            input.headers = _injected(input.headers)
            result = next(input)
            if getattr(result, "run_id", None):
                span.set_attribute(RUN_ID, result.run_id)
            return result

    def signal_workflow(self, input: ic.SignalWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        return self._message("signal_workflow", input, next)

    def update_workflow(self, input: ic.UpdateWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        return self._message("update_workflow", input, next)

    def query_workflow(self, input: ic.QueryWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        return self._message("query_workflow", input, next)

    def cancel_workflow(self, input: ic.CloseWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        return self._close("CancelWorkflow", input, next)

    def terminate_workflow(self, input: ic.CloseWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        return self._close("TerminateWorkflow", input, next)

    def archive_workflow(self, input: ic.CloseWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        return self._close("ArchiveWorkflow", input, next)

    def signal_with_start_workflow(
        self, input: ic.SignalWithStartInput, next: ic.Next[Any, Any]
    ) -> Any:
        return self._with_start("SignalWithStartWorkflow", input, next)

    def update_with_start_workflow(
        self, input: ic.UpdateWithStartInput, next: ic.Next[Any, Any]
    ) -> Any:
        return self._with_start("UpdateWithStartWorkflow", input, next)

    def _with_start(self, verb: str, input: Any, next: ic.Next[Any, Any]) -> Any:
        attributes = _workflow_attributes(input, MESSAGE_NAME, input.name)
        with self._client_span(f"{verb}:{input.name}", attributes) as span:
            input.headers = _injected(input.headers)
            result = next(input)
            started: Any = getattr(result, "start", None)
            if getattr(started, "run_id", None):
                span.set_attribute(RUN_ID, started.run_id)
            return result

    def _message(self, method: str, input: Any, next: ic.Next[Any, Any]) -> Any:
        attributes = _workflow_attributes(input, MESSAGE_NAME, input.name)
        with self._client_span(f"{_CLIENT_VERBS[method]}:{input.name}", attributes):
            input.headers = _injected(input.headers)
            return next(input)

    def _close(self, verb: str, input: ic.CloseWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        with self._client_span(f"{verb}:{input.workflow_type}", _workflow_attributes(input)):
            input.headers = _injected(input.headers)
            return next(input)

    @contextmanager
    def _client_span(self, name: str, attributes: dict[str, Any]) -> Iterator[Span]:
        with self._tracer.start_as_current_span(
            name, kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield span

    # ----------------------------------------------------------- workflow task
    def execute_workflow_task(
        self, input: ic.ExecuteWorkflowTaskInput, next: ic.Next[Any, None]
    ) -> None:
        attributes: dict[str, Any] = {
            WORKFLOW_TYPE: input.workflow_type,
            INSTANCE_ID: input.instance_id,
            RUN_ID: input.run_id,
            TASK_ATTEMPT: input.attempt,
            TASK_EVENTS: input.events,
            TASK_REPLAYED: input.replayed_events,
            TASK_REPLAY: input.replayed_events > 0,
            TASK_STICKY: "hit" if input.sticky else "cold",
        }
        context = _extracted(input.headers)
        if not trace.get_current_span(context).get_span_context().is_valid:
            context = _run_root(input.run_id)
        with self._tracer.start_as_current_span(
            f"WorkflowTask:{input.workflow_type}",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        ) as span:
            stack = self._task_stack()
            stack.append((span, input))
            try:
                return next(input)
            finally:
                stack.pop()

    def _task_stack(self) -> list[tuple[Span, ic.ExecuteWorkflowTaskInput]]:
        stack: list[tuple[Span, ic.ExecuteWorkflowTaskInput]] | None
        stack = getattr(self._tasks, "stack", None)
        if stack is None:
            stack = self._tasks.stack = []
        return stack

    # ---------------------------------------------------------- workflow body
    def handle_workflow(self, input: ic.HandleWorkflowInput, next: ic.Next[Any, Any]) -> Any:
        try:
            result = next(input)
        except ContinueAsNewRequested:
            self._body_span("ContinueAsNew", {})  # the next run starts with these headers
            raise
        except Exception as exc:  # the run fails, or the task if the error is undeclared
            self._body_span("WorkflowRaised", {}, error=exc)
            raise
        self._body_span("CompleteWorkflow", {})
        return result

    def handle_signal(self, input: ic.HandleSignalInput, next: ic.Next[Any, None]) -> None:
        self._body_span(f"HandleSignal:{input.name}", {MESSAGE_NAME: input.name}, input.headers)
        return next(input)

    def handle_update(self, input: ic.HandleUpdateInput, next: ic.Next[Any, Any]) -> Any:
        self._body_span(f"HandleUpdate:{input.name}", {MESSAGE_NAME: input.name}, input.headers)
        return next(input)

    def schedule_activity(self, input: ic.ScheduleActivityInput, next: ic.Next[Any, Any]) -> Any:
        carrier: dict[str, str] = {}
        self._body_span(
            f"StartActivity:{input.activity_type}",
            {ACTIVITY_TYPE: input.activity_type},
            carrier=carrier,
        )
        input.headers = {**input.headers, **carrier}
        return next(input)

    def start_child(self, input: ic.StartChildInput, next: ic.Next[Any, Any]) -> Any:
        carrier: dict[str, str] = {}
        self._body_span(
            f"StartChildWorkflow:{input.workflow_type}",
            {"durable_workflow.child.type": input.workflow_type},
            carrier=carrier,
        )
        input.headers = {**input.headers, **carrier}
        return next(input)

    def signal_external(self, input: ic.SignalExternalInput, next: ic.Next[Any, Any]) -> Any:
        carrier: dict[str, str] = {}
        self._body_span(
            f"SignalExternalWorkflow:{input.name}",
            {MESSAGE_NAME: input.name, "durable_workflow.target.instance_id": input.instance_id},
            carrier=carrier,
        )
        input.headers = {**input.headers, **carrier}
        return next(input)

    def start_timer(self, input: ic.StartTimerInput, next: ic.Next[Any, Any]) -> Any:
        attributes = {TIMER_SECONDS: input.seconds}
        self._body_span("StartTimer", attributes)
        result = next(input)
        if result is None:  # the body waited for it (inside all()/select() it did not)
            self._body_span("FireTimer", attributes)
        return result

    def _body_span(
        self,
        name: str,
        attributes: dict[str, Any],
        linked: Mapping[str, str] | None = None,
        *,
        carrier: dict[str, str] | None = None,
        error: BaseException | None = None,
    ) -> None:
        """A zero-length span under the current workflow task, for new work only."""
        runtime = current_runtime()
        stack = self._task_stack()
        if runtime is None or runtime.replaying or not stack:
            return
        task_span, task = stack[-1]
        attributes = {
            WORKFLOW_TYPE: task.workflow_type,
            INSTANCE_ID: task.instance_id,
            RUN_ID: task.run_id,
            **attributes,
        }
        links = _links(linked)
        # The SDK reads the clock and may export at once: neither feeds the body.
        with guards.allowed():
            span = self._tracer.start_span(
                name,
                context=trace.set_span_in_context(task_span),
                attributes=attributes,
                links=links,
            )
            if error is not None:
                _record(span, error)
            if carrier is not None:
                propagate.inject(carrier, context=trace.set_span_in_context(span))
            span.end()

    # ---------------------------------------------------------------- activity
    def execute_activity(self, input: ic.ExecuteActivityInput, next: ic.Next[Any, Any]) -> Any:
        info = input.info
        attributes: dict[str, Any] = {
            WORKFLOW_TYPE: info.workflow_type,
            INSTANCE_ID: info.workflow_instance_id,
            RUN_ID: info.workflow_run_id,
            ACTIVITY_TYPE: info.activity_type,
            ACTIVITY_ID: info.activity_id,
            ATTEMPT: info.attempt,
            RETRY: info.attempt > 1,
        }
        if info.queue:
            attributes[QUEUE] = info.queue
        span = self._tracer.start_span(
            f"RunActivity:{info.activity_type}",
            context=_extracted(input.headers),
            kind=SpanKind.SERVER,
            attributes=attributes,
        )
        try:
            with trace.use_span(span, end_on_exit=False):
                result = next(input)
        except BaseException as exc:
            _record(span, exc)
            span.end()
            raise
        if inspect.isawaitable(result):  # an async activity: the span lasts its await
            return _awaited(span, result)
        span.end()
        return result


async def _awaited(span: Span, awaitable: Awaitable[Any]) -> Any:
    try:
        with trace.use_span(span, end_on_exit=False):
            return await awaitable
    except BaseException as exc:
        _record(span, exc)
        raise
    finally:
        span.end()


def _record(span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_attribute(ERROR_TYPE, type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(error)[:200]))


def _injected(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with the current span's context added (a copy: the caller's map stays)."""
    carrier = dict(headers)
    propagate.inject(carrier)
    return carrier


def _extracted(headers: Mapping[str, str]) -> Context:
    return propagate.extract(dict(headers))


def _run_root(run_id: str) -> Context:
    """A parent for the tasks of a run started without a trace context (a schedule's, one
    started where tracing was off): a remote span whose ids derive from the run id, so
    all its tasks are one trace whose root is that (never exported) span."""
    digest = hashlib.sha256(f"durable_workflow.run:{run_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _links(headers: Mapping[str, str] | None) -> list[trace.Link]:
    if not headers:
        return []
    context = trace.get_current_span(_extracted(headers)).get_span_context()
    return [trace.Link(context)] if context.is_valid else []


def _workflow_attributes(input: Any, *extra: Any) -> dict[str, Any]:
    attributes = {WORKFLOW_TYPE: input.workflow_type, INSTANCE_ID: input.instance_id}
    if getattr(input, "run_id", None):
        attributes[RUN_ID] = input.run_id
    attributes.update(dict(zip(extra[::2], extra[1::2], strict=True)))
    return attributes
