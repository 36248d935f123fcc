"""Composition helpers: child workflows, all/parallel, select, run_async, continue-as-new.

Like every in-body helper they forward to the runtime of the running body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from durable_workflow import interceptors, registry
from durable_workflow.authoring.handles import ChildWorkflowHandle
from durable_workflow.authoring.helpers import _runtime, _split_options
from durable_workflow.authoring.protocols import Handles, P, R, bind_call, result_hint
from durable_workflow.engine.calls import Call
from durable_workflow.engine.failures import class_path
from durable_workflow.engine.runtime import WorkflowRuntime
from durable_workflow.engine.selection import SelectionResult
from durable_workflow.headers import check_headers
from durable_workflow.options import ChildWorkflowOptions

T = TypeVar("T")


def _child_call(
    helper: str, workflow: type | str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """What ``child()`` and ``start_child()`` hand the runtime."""
    options, args = _split_options(args, kwargs.pop("options", None), ChildWorkflowOptions)
    result_type = kwargs.pop("result_type", None)
    options = options or ChildWorkflowOptions()
    if isinstance(workflow, str):
        cls = registry.workflow_class(workflow)
    elif isinstance(workflow, type) and getattr(workflow, "type_key", None):
        cls = workflow
    else:
        raise TypeError(f"{helper}() takes a Workflow subclass or a type key, not {workflow!r}")
    snapshot = options.snapshot()
    snapshot["queue"] = snapshot["queue"] or getattr(cls, "queue", None)
    snapshot["connection"] = snapshot["connection"] or getattr(cls, "connection", None)
    key = str(cls.type_key)  # type: ignore[attr-defined]
    return {
        "workflow_type": key,
        "workflow_class": class_path(cls),
        "arguments": bind_call(cls, args, kwargs, f"{helper}({key})"),
        "options": snapshot,
        "result_type": result_hint(cls, result_type),
        "child_options": options,
    }


@overload
def child(
    workflow: type[Handles[P, R]],
    options: ChildWorkflowOptions,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> R: ...
@overload
def child(workflow: type[Handles[P, R]], /, *args: P.args, **kwargs: P.kwargs) -> R: ...
@overload
def child(
    workflow: type[Handles[..., Any]] | str,
    /,
    *args: Any,
    result_type: type[T],
    options: ChildWorkflowOptions | None = None,
) -> T: ...
@overload
def child(workflow: type[Handles[..., R]], /, *args: Any, options: ChildWorkflowOptions) -> R: ...
@overload
def child(workflow: str, /, *args: Any, options: ChildWorkflowOptions | None = None) -> Any: ...
def child(workflow: type | str, /, *args: Any, **kwargs: Any) -> Any:
    """Start a child workflow and return its result (or raise its failure).

    Raises ``ChildWorkflowFailed``, ``ChildWorkflowCancelled`` or
    ``ChildWorkflowTerminated`` when the child does not complete, and
    ``WorkflowAlreadyStartedError`` when ``options.instance_id`` is taken.
    Arguments and the result are typed by the child's ``handle()`` (or
    ``result_type=``).
    """
    return _start_child(_runtime("child"), _child_call("child", workflow, args, kwargs), True)


@overload
def start_child(
    workflow: type[Handles[P, R]],
    options: ChildWorkflowOptions,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> ChildWorkflowHandle[R]: ...
@overload
def start_child(
    workflow: type[Handles[P, R]], /, *args: P.args, **kwargs: P.kwargs
) -> ChildWorkflowHandle[R]: ...
@overload
def start_child(
    workflow: type[Handles[..., Any]] | str,
    /,
    *args: Any,
    result_type: type[T],
    options: ChildWorkflowOptions | None = None,
) -> ChildWorkflowHandle[T]: ...
@overload
def start_child(
    workflow: type[Handles[..., R]], /, *args: Any, options: ChildWorkflowOptions
) -> ChildWorkflowHandle[R]: ...
@overload
def start_child(
    workflow: str, /, *args: Any, options: ChildWorkflowOptions | None = None
) -> ChildWorkflowHandle[Any]: ...
def start_child(workflow: type | str, /, *args: Any, **kwargs: Any) -> ChildWorkflowHandle[Any]:
    """Start a child workflow and return once it has started: a handle on it.

    The handle knows the child's instance id and run id; ``handle.result()`` waits
    for it later (the handle is also a member of ``dw.all()`` / ``dw.select()``),
    ``handle.signal()`` and ``handle.cancel()`` talk to it. Raises
    ``WorkflowAlreadyStartedError`` when ``options.instance_id`` is taken.
    """
    runtime = _runtime("start_child")
    op = _start_child(runtime, _child_call("start_child", workflow, args, kwargs), False)
    return ChildWorkflowHandle(runtime, op)


def _start_child(runtime: WorkflowRuntime, call: dict[str, Any], wait: bool) -> Any:
    """Start the child through the outbound interceptors (``start_child``)."""
    options = call.pop("child_options")

    def start(input: interceptors.StartChildInput) -> Any:
        if input.headers:
            call["options"]["headers"] = check_headers(input.headers)
        return runtime.start_child(**{**call, "arguments": list(input.args)}, wait=wait)

    started = interceptors.StartChildInput(call["workflow_type"], call["arguments"], options)
    return interceptors.call("start_child", started, start)


execute_child_workflow = child


def all(calls: Iterable[Callable[[], T]]) -> list[T]:
    """Run every member at once and wait for all of them; results keep the input shape.

    Each member is a zero-argument callable making one durable call, e.g.
    ``lambda: dw.activity(Charge, order)``, or a nested ``dw.all([...])``. The
    earliest recorded failure is raised; later ones never replace it.
    """
    results: list[T] = _runtime("all").run_all(calls)
    return results


parallel = all


def select(members: dict[Any, Callable[[], Any]] | Iterable[Callable[[], Any]]) -> SelectionResult:
    """Start every member and return as soon as the first one completes or fails.

    Members are callables as for ``all()`` (activities, children, timers,
    signal or condition waits, nested ``all()``), in a dict (keys: non-empty
    strings or ints >= 0) or a list (keys are the indexes). Losers keep
    running; use ``result.handles[key].wait()`` or ``.cancel()``.
    """
    return _runtime("select").run_select(members)


def run_async(callback: Callable[[], Any]) -> Any:
    """Run ``callback`` (straight-line code with durable steps) as a concurrent branch.

    Used directly it returns the callback's result. As a member of ``all()`` or
    ``select()`` it lets one member take several durable steps.
    """
    runtime = _runtime("run_async")
    if not callable(callback):
        raise TypeError("run_async() takes a zero-argument callable")
    return runtime.run_call(Call("async", None, lambda meta: runtime.start_branch(callback)))


def continue_as_new(*args: Any) -> None:
    """End this run and start a fresh one (same instance id) with ``args``."""
    _runtime("continue_as_new").continue_as_new(list(args))
