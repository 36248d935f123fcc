"""Interceptors and workflows for the headers and interceptor tests.

``TenantInterceptor`` is the tenant-context example of docs/how-to/interceptors.md:
the client sends the caller's tenant as a header, the workflow passes its run's
tenant on to activities and children, and an activity attempt runs with it set.
``Recording`` interceptors note the order they are called in (``CALLS``).
"""

from __future__ import annotations

import contextvars
import inspect
from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from durable_workflow.interceptors import (
    CloseWorkflowInput,
    ExecuteActivityInput,
    HandleQueryInput,
    HandleSignalInput,
    HandleUpdateInput,
    HandleWorkflowInput,
    QueryWorkflowInput,
    ScheduleActivityInput,
    SignalExternalInput,
    SignalWithStartInput,
    SignalWorkflowInput,
    StartChildInput,
    StartTimerInput,
    StartWorkflowInput,
    UpdateWithStartInput,
    UpdateWorkflowInput,
)

#: The tenant the current code runs for (the caller's, or an activity attempt's).
current_tenant: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_tenant", default=None
)


class TenantInterceptor(dw.Interceptor):
    """Carries ``current_tenant`` from the caller to the workflow, its activities and
    its children, as the ``tenant`` header."""

    def start_workflow(self, input: StartWorkflowInput, next: Any) -> Any:
        tenant = current_tenant.get()
        if tenant is not None:
            input.headers.setdefault("tenant", tenant)
        return next(input)

    def signal_workflow(self, input: SignalWorkflowInput, next: Any) -> Any:
        tenant = current_tenant.get()
        if tenant is not None:
            input.headers.setdefault("tenant", tenant)
        return next(input)

    def schedule_activity(self, input: ScheduleActivityInput, next: Any) -> Any:
        tenant = dw.info().headers.get("tenant")
        if tenant is not None:
            input.headers.setdefault("tenant", tenant)
        return next(input)

    def start_child(self, input: StartChildInput, next: Any) -> Any:
        tenant = dw.info().headers.get("tenant")
        if tenant is not None:
            input.headers.setdefault("tenant", tenant)
        return next(input)

    def signal_external(self, input: SignalExternalInput, next: Any) -> Any:
        tenant = dw.info().headers.get("tenant")
        if tenant is not None:
            input.headers.setdefault("tenant", tenant)
        return next(input)

    def execute_activity(self, input: ExecuteActivityInput, next: Any) -> Any:
        tenant = input.headers.get("tenant")
        if inspect.iscoroutinefunction(getattr(input.activity, "handle", None)):
            # ``next`` gives an async handle()'s coroutine: set the tenant around its run.
            async def scoped() -> Any:
                token = current_tenant.set(tenant)
                try:
                    return await next(input)
                finally:
                    current_tenant.reset(token)

            return scoped()
        token = current_tenant.set(tenant)
        try:
            return next(input)
        finally:
            current_tenant.reset(token)


#: (interceptor, method, detail) in call order; tests clear it.
CALLS: list[tuple[str, str, Any]] = []


class Recording(dw.Interceptor):
    """Notes every call it sees and adds a header ``seen-by`` naming the chain so far."""

    name = "?"

    def _note(self, method: str, input: Any, detail: Any = None) -> None:
        CALLS.append((self.name, method, detail))
        headers = getattr(input, "headers", None)
        if isinstance(headers, dict):
            seen = headers.get("seen-by")
            headers["seen-by"] = f"{seen},{self.name}" if seen else self.name

    def start_workflow(self, input: StartWorkflowInput, next: Any) -> Any:
        self._note("start_workflow", input)
        result = next(input)
        CALLS.append((self.name, "start_workflow:done", result.accepted))
        return result

    def signal_workflow(self, input: SignalWorkflowInput, next: Any) -> Any:
        self._note("signal_workflow", input, input.name)
        return next(input)

    def update_workflow(self, input: UpdateWorkflowInput, next: Any) -> Any:
        self._note("update_workflow", input, input.name)
        return next(input)

    def query_workflow(self, input: QueryWorkflowInput, next: Any) -> Any:
        self._note("query_workflow", input, input.name)
        return next(input)

    def cancel_workflow(self, input: CloseWorkflowInput, next: Any) -> Any:
        self._note("cancel_workflow", input, input.reason)
        return next(input)

    def terminate_workflow(self, input: CloseWorkflowInput, next: Any) -> Any:
        self._note("terminate_workflow", input, input.reason)
        return next(input)

    def archive_workflow(self, input: CloseWorkflowInput, next: Any) -> Any:
        self._note("archive_workflow", input, input.reason)
        return next(input)

    def signal_with_start_workflow(self, input: SignalWithStartInput, next: Any) -> Any:
        self._note("signal_with_start_workflow", input, input.name)
        return next(input)

    def update_with_start_workflow(self, input: UpdateWithStartInput, next: Any) -> Any:
        self._note("update_with_start_workflow", input, input.name)
        return next(input)

    # Workflow code: these run on every replay too, so the notes repeat on replay.
    def handle_workflow(self, input: HandleWorkflowInput, next: Any) -> Any:
        CALLS.append((self.name, "handle_workflow", dict(input.headers)))
        return next(input)

    def handle_signal(self, input: HandleSignalInput, next: Any) -> Any:
        CALLS.append((self.name, "handle_signal", (input.name, dict(input.headers))))
        return next(input)

    def handle_update(self, input: HandleUpdateInput, next: Any) -> Any:
        CALLS.append((self.name, "handle_update", (input.name, dict(input.headers))))
        return next(input)

    def handle_query(self, input: HandleQueryInput, next: Any) -> Any:
        CALLS.append((self.name, "handle_query", (input.name, dict(input.headers))))
        return next(input)

    def schedule_activity(self, input: ScheduleActivityInput, next: Any) -> Any:
        self._note("schedule_activity", input, input.activity_type)
        return next(input)

    def start_child(self, input: StartChildInput, next: Any) -> Any:
        self._note("start_child", input, input.workflow_type)
        return next(input)

    def start_timer(self, input: StartTimerInput, next: Any) -> Any:
        CALLS.append((self.name, "start_timer", input.seconds))
        return next(input)

    def signal_external(self, input: SignalExternalInput, next: Any) -> Any:
        self._note("signal_external", input, input.name)
        return next(input)

    def execute_activity(self, input: ExecuteActivityInput, next: Any) -> Any:
        CALLS.append((self.name, "execute_activity", dict(input.headers)))
        return next(input)


class Outer(Recording):
    name = "outer"


class Inner(Recording):
    name = "inner"


class WrapsResults(dw.Interceptor):
    """Changes what a call returns, to show results pass back out through the chain."""

    def execute_activity(self, input: ExecuteActivityInput, next: Any) -> Any:
        return {**next(input), "wrapped": True}

    def handle_query(self, input: HandleQueryInput, next: Any) -> Any:
        return {"wrapped": next(input)}


class WhoAmI(Activity):
    type_key = "tests.tenancy.whoami"

    def handle(self, label: str) -> dict[str, Any]:
        return {
            "label": label,
            "tenant": current_tenant.get(),
            "headers": dict(dw.activity_info().headers),
        }


class TenantChild(Workflow):
    type_key = "tests.tenancy.child"

    def handle(self) -> dict[str, Any]:
        return {"child_headers": dict(dw.info().headers), "activity": dw.activity(WhoAmI, "c")}


class TenantOrder(Workflow):
    """An activity, a timer, a child, a signal handler, an update and a query."""

    type_key = "tests.tenancy.order"

    def __init__(self) -> None:
        self.signals: list[str] = []

    def handle(self, with_child: bool = True) -> dict[str, Any]:
        first = dw.activity(WhoAmI, "a")
        dw.timer(0)
        child = dw.child(TenantChild) if with_child else None
        dw.wait(lambda: "go" in self.signals)
        return {"headers": dict(dw.info().headers), "activity": first, "child": child}

    @dw.signal
    def poke(self, value: str) -> None:
        self.signals.append(value)

    @dw.update
    def rename(self, value: str) -> str:
        self.signals.append(f"update:{value}")
        return value.upper()

    @dw.query
    def seen(self) -> list[str]:
        return list(self.signals)


class TenantLocal(Workflow):
    """A local activity: scheduled and run in the workflow task's process."""

    type_key = "tests.tenancy.local"

    def handle(self) -> dict[str, Any]:
        return dw.local_activity(WhoAmI, "l")


class AsyncWhoAmI(Activity):
    type_key = "tests.tenancy.async-whoami"

    async def handle(self, label: str) -> dict[str, Any]:
        return {"label": label, "tenant": current_tenant.get()}


class TenantAsync(Workflow):
    type_key = "tests.tenancy.async"

    def handle(self) -> dict[str, Any]:
        return dw.activity(AsyncWhoAmI, "async")


class Poker(Workflow):
    """Signals another workflow from its body (an external handle)."""

    type_key = "tests.tenancy.poker"

    def handle(self, target: str) -> str:
        dw.external_workflow(target).signal("poke", "go")
        return "sent"
