"""The in-body helpers: tiny functions forwarding to the current runtime.

Each one is a durable step: it is recorded the first time and answered from
history on every replay. Outside a workflow body they raise
``NotInWorkflowError``.
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from durable_workflow import ids, interceptors, registry
from durable_workflow.authoring.protocols import AsyncHandles, Handles, P, R, bind_call, result_hint
from durable_workflow.engine.asyncguard import refuse_async_caller
from durable_workflow.engine.durations import Duration, to_delay
from durable_workflow.engine.failures import class_path
from durable_workflow.engine.runtime import WorkflowRuntime, current_runtime
from durable_workflow.exceptions import (
    ConfigurationError,
    InvalidDurationError,
    NotInWorkflowError,
)
from durable_workflow.headers import check_headers
from durable_workflow.info import WorkflowInfo
from durable_workflow.options import ActivityOptions, LocalActivityOptions

T = TypeVar("T")


def _runtime(helper: str) -> WorkflowRuntime:
    runtime = current_runtime()
    if runtime is None:
        raise NotInWorkflowError(
            f"durable_workflow.{helper}() can only be called inside a workflow body"
        )
    refuse_async_caller(f"durable_workflow.{helper}()")
    return runtime


def _split_options(args: tuple[Any, ...], options: Any, kind: type) -> tuple[Any, tuple[Any, ...]]:
    if options is None and args and isinstance(args[0], kind):
        return args[0], args[1:]
    return options, args


@overload
def activity(  # an async handle(): the workflow receives its awaited R
    activity: type[AsyncHandles[P, R]],
    options: ActivityOptions,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> R: ...
@overload
def activity(activity: type[AsyncHandles[P, R]], /, *args: P.args, **kwargs: P.kwargs) -> R: ...
@overload
def activity(
    activity: type[Handles[P, R]], options: ActivityOptions, /, *args: P.args, **kwargs: P.kwargs
) -> R: ...
@overload
def activity(activity: type[Handles[P, R]], /, *args: P.args, **kwargs: P.kwargs) -> R: ...
@overload
def activity(
    activity: type[Handles[..., Any]] | str,
    /,
    *args: Any,
    result_type: type[T],
    options: ActivityOptions | None = None,
) -> T: ...
@overload
def activity(activity: type[Handles[..., R]], /, *args: Any, options: ActivityOptions) -> R: ...
@overload
def activity(activity: str, /, *args: Any, options: ActivityOptions | None = None) -> Any: ...
def activity(activity: type | str, /, *args: Any, **kwargs: Any) -> Any:
    """Run an activity and return its result (or raise its final failure).

    Options go first after the class (or as ``options=``); keyword arguments are
    moved to their positions in ``handle()``. The result is decoded as
    ``handle()``'s return annotation declares, or as ``result_type=``.
    """
    options, args = _split_options(args, kwargs.pop("options", None), ActivityOptions)
    result_type = kwargs.pop("result_type", None)
    return schedule_activity(
        activity, args, options, helper="activity", kwargs=kwargs, result_type=result_type
    )


def schedule_activity(
    activity: type | str,
    args: tuple[Any, ...],
    options: ActivityOptions | None,
    *,
    helper: str,
    worker_session: dict[str, Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    result_type: Any = None,
) -> Any:
    """Schedule a queued activity; ``worker_session`` pins it to a session's holder."""
    from durable_workflow.authoring.activity import Activity, retry_policy

    runtime = _runtime(helper)
    if isinstance(activity, str):
        try:
            cls: type[Activity] | None = registry.activity_class(activity)
        except LookupError:
            cls = None  # served by another process; routing comes from options
        type_key = activity
    elif isinstance(activity, type) and issubclass(activity, Activity):
        cls, type_key = activity, str(activity.type_key)
    else:
        raise TypeError(f"activity() takes an Activity subclass or a type key, not {activity!r}")
    arguments = bind_call(cls, args, kwargs or {}, f"{helper}({type_key})")
    headers: dict[str, str] = {}

    def routing() -> tuple[dict[str, Any], str | None, str | None]:
        # Only a new step needs its options snapshot; replay skips this work.
        # Per-call options win over the session's routing, which wins over the class's.
        snapshot = retry_policy(cls, options)
        session = worker_session or {}
        queue = snapshot["queue"] or session.get("queue") or (cls.queue if cls else None)
        connection = (
            snapshot["connection"] or session.get("connection") or (cls.connection if cls else None)
        )
        if worker_session is not None:
            snapshot["worker_session"] = dict(worker_session)
        if headers:
            snapshot["headers"] = headers
        return snapshot, queue, connection

    def schedule(input: interceptors.ScheduleActivityInput) -> Any:
        # Checked here, inside the chain: an interceptor's headers are caller input too.
        headers.update(check_headers(input.headers))
        return runtime.schedule_activity(
            activity_type=type_key,
            activity_class=class_path(cls) if cls else "",
            arguments=list(input.args),
            routing=routing,
            result_type=result_hint(cls, result_type),
        )

    scheduled = interceptors.ScheduleActivityInput(type_key, list(arguments), options)
    return interceptors.call("schedule_activity", scheduled, schedule)


execute_activity = activity


def timer(duration: Duration) -> None:
    """Sleep durably; ``timer(0)`` returns at once and is still recorded.

    Durations resolve to the millisecond (``timer(0.1)`` waits 100 ms): a
    fraction of a millisecond rounds up, and a timer never fires early.
    """
    runtime = _runtime("timer")
    delay = to_delay(duration, now=runtime.now())
    # Inside all()/select() this hands the group its Call: return it, whatever the type says.
    return cast(
        None,
        interceptors.call(
            "start_timer",
            interceptors.StartTimerInput(delay),
            lambda input: runtime.timer(input.seconds),
        ),
    )


def seconds(n: float) -> None:
    return timer(n)


def minutes(n: float) -> None:
    return timer(n * 60)


def hours(n: float) -> None:
    return timer(n * 3600)


def days(n: float) -> None:
    return timer(n * 86400)


def weeks(n: float) -> None:
    return timer(n * 604800)


def _whole(n: int, unit: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int | float) or n != int(n):
        raise InvalidDurationError(f"{unit}() takes a whole number, got {n!r}")
    return int(n)


def months(n: int) -> None:
    return timer(f"{_whole(n, 'months')} months")


def years(n: int) -> None:
    return timer(f"{_whole(n, 'years')} years")


def side_effect(fn: Callable[[], T], *, result_type: type[T] | None = None) -> T:
    """Call ``fn`` once, record its value, and return the recorded value on replay.

    The value is decoded as ``fn``'s return annotation (or ``result_type=``)
    declares, on the first run as on replay; a value that could not replay as its
    own type (a dataclass from a lambda) is refused here rather than later.
    """
    from durable_workflow.converter import signature_of

    hint = result_type if result_type is not None else signature_of(fn, method=False).result
    value: T = _runtime("side_effect").side_effect(fn, hint)
    return value


def uuid4() -> str:
    """A random UUID string that replays identically."""
    return str(_runtime("uuid4").side_effect(lambda: str(_uuid.uuid4())))


def uuid7() -> str:
    """A time-ordered UUID string that replays identically."""
    return str(_runtime("uuid7").side_effect(lambda: str(ids.uuid7())))


def now() -> dt.datetime:
    """Deterministic workflow time: when the last input the body consumed was recorded."""
    return _runtime("now").now()


def info() -> WorkflowInfo:
    """The running workflow: ids, type, parent, start time, history so far, queue, memo
    and search attributes, as of the point of history the body has reached."""
    return _runtime("info").info()


def _timeout_seconds(runtime: WorkflowRuntime, timeout: Duration | None) -> float | None:
    return None if timeout is None else to_delay(timeout, now=runtime.now())


def _declared(runtime: WorkflowRuntime, name: str) -> str:
    contracts = getattr(type(runtime.instance), "_dw_signal_contracts", {})
    if name not in contracts:
        raise ConfigurationError(
            f"signal {name!r} is not declared; add it to {type(runtime.instance).__name__}.signals"
        )
    return name


def wait_signal(name: str, timeout: Duration | None = None) -> Any:
    """Wait for the next signal called ``name``; ``None`` if ``timeout`` passes first.

    The value is ``True`` for a signal sent without arguments, the argument for
    one, and the list of arguments for several.
    """
    runtime = _runtime("wait_signal")
    return runtime.wait_signal(_declared(runtime, name), _timeout_seconds(runtime, timeout))


def wait(
    condition: str | Callable[[], Any],
    *,
    timeout: Duration | None = None,
    condition_key: str | None = None,
) -> Any:
    """Wait for a named signal (a string) or until a predicate over workflow state holds.

    With a predicate: returns True when it holds, False when ``timeout`` wins.
    With a signal name: returns the payload, or None when ``timeout`` wins.
    """
    runtime = _runtime("wait")
    if isinstance(condition, str):
        if condition_key is not None:
            raise TypeError("condition_key only applies to predicate waits")
        return runtime.wait_signal(
            _declared(runtime, condition), _timeout_seconds(runtime, timeout)
        )
    if not callable(condition):
        raise TypeError(f"wait() takes a signal name or a predicate, not {condition!r}")
    return runtime.wait_condition(condition, _timeout_seconds(runtime, timeout), condition_key)


def wait_with_timeout(
    timeout: Duration, condition: str | Callable[[], Any], condition_key: str | None = None
) -> Any:
    """``wait(condition, timeout=timeout, condition_key=...)`` with the deadline first."""
    return wait(condition, timeout=timeout, condition_key=condition_key)


def get_version(change_id: str, min_supported: int = -1, max_supported: int = 1) -> int:
    """The version of a change point this run follows (see docs/how-to/versioning.md).

    New executions record ``max_supported``; runs that predate the change point
    get ``DEFAULT_VERSION`` (-1); a recorded version outside the supported range
    raises ``VersionNotSupported``.
    """
    return _runtime("get_version").get_version(change_id, min_supported, max_supported, "version")


def patched(change_id: str) -> bool:
    """True when this run takes the code path introduced by ``change_id``."""
    return _runtime("patched").get_version(change_id, -1, 1, "patch") == 1


def deprecate_patch(change_id: str) -> None:
    """Use once every run that took the old path is finished: always the new path."""
    _runtime("deprecate_patch").get_version(change_id, 1, 1, "patch")


def upsert_memo(entries: dict[str, Any]) -> None:
    """Merge ``entries`` into the run's memo (None deletes a key); a durable step."""
    from durable_workflow.authoring.visibility import check_memo

    _runtime("upsert_memo").upsert_visibility("memo", check_memo(entries))


def upsert_search_attributes(attributes: dict[str, Any]) -> None:
    """Merge ``attributes`` into the run's search attributes (None deletes); a durable step."""
    from durable_workflow.authoring.visibility import check_search_attributes

    _runtime("upsert_search_attributes").upsert_visibility(
        "search_attributes", check_search_attributes(attributes)
    )


LocalOptions = LocalActivityOptions | ActivityOptions


@overload
def local_activity(  # an async handle(): the workflow receives its awaited R
    activity: type[AsyncHandles[P, R]], options: LocalOptions, /, *args: P.args, **kwargs: P.kwargs
) -> R: ...
@overload
def local_activity(
    activity: type[AsyncHandles[P, R]], /, *args: P.args, **kwargs: P.kwargs
) -> R: ...
@overload
def local_activity(
    activity: type[Handles[P, R]], options: LocalOptions, /, *args: P.args, **kwargs: P.kwargs
) -> R: ...
@overload
def local_activity(activity: type[Handles[P, R]], /, *args: P.args, **kwargs: P.kwargs) -> R: ...
@overload
def local_activity(
    activity: type[Handles[..., Any]] | str,
    /,
    *args: Any,
    result_type: type[T],
    options: LocalOptions | None = None,
) -> T: ...
@overload
def local_activity(activity: type[Handles[..., R]], /, *args: Any, options: LocalOptions) -> R: ...
@overload
def local_activity(activity: str, /, *args: Any, options: LocalOptions | None = None) -> Any: ...
def local_activity(activity: type | str, /, *args: Any, **kwargs: Any) -> Any:
    """Run an activity inside this workflow task's process (no queue hop).

    Retries are durable workflow tasks with back-off; options are
    ``LocalActivityOptions`` (an ``ActivityOptions`` is accepted when it has no
    connection, queue or schedule-to-start timeout). Arguments and the result
    are typed as for ``activity()``.
    """
    from durable_workflow.authoring.activity import Activity, retry_policy

    runtime = _runtime("local_activity")
    options, result_type = kwargs.pop("options", None), kwargs.pop("result_type", None)
    if options is None and args and isinstance(args[0], ActivityOptions | LocalActivityOptions):
        options, args = args[0], args[1:]
    if isinstance(options, ActivityOptions):
        options = LocalActivityOptions.from_activity_options(options)
    options = options or LocalActivityOptions()
    if isinstance(activity, str):
        cls: Any = registry.activity_class(activity)
    elif isinstance(activity, type) and issubclass(activity, Activity):
        cls = activity
    else:
        raise TypeError(f"local_activity() takes an Activity subclass or a type key: {activity!r}")
    policy = retry_policy(
        cls, ActivityOptions(max_attempts=options.max_attempts, backoff=options.backoff)
    )
    snapshot = {
        **options.snapshot(),
        "max_attempts": policy["max_attempts"],
        "backoff": policy["backoff"],
    }

    def schedule(input: interceptors.ScheduleActivityInput) -> Any:
        headers = check_headers(input.headers)
        return runtime.schedule_local_activity(
            activity_type=str(cls.type_key),
            activity_class=class_path(cls),
            arguments=list(input.args),
            options={**snapshot, "headers": headers} if headers else snapshot,
            result_type=result_hint(cls, result_type),
        )

    arguments = bind_call(cls, args, kwargs, f"local_activity({cls.type_key})")
    scheduled = interceptors.ScheduleActivityInput(
        str(cls.type_key), list(arguments), options, local=True
    )
    return interceptors.call("schedule_activity", scheduled, schedule)


execute_local_activity = local_activity
