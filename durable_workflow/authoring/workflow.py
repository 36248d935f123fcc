"""The ``Workflow`` base class. Bodies are deterministic and replayed from history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, Literal

from durable_workflow import registry
from durable_workflow.authoring import (
    composition,
    decorators,
    handles,
    helpers,
    sessions,
    sync,
)
from durable_workflow.authoring.handles import ChildWorkflowHandle
from durable_workflow.authoring.protocols import HandleP, HandleR
from durable_workflow.authoring.saga import SagaMixin
from durable_workflow.authoring.streams import DEFAULT_STREAM, MessageStream
from durable_workflow.engine import guards
from durable_workflow.engine.asyncguard import refuse_async_caller, refuse_async_methods
from durable_workflow.engine.runtime import WorkflowRuntime, current_runtime
from durable_workflow.exceptions import ConfigurationError, NotInWorkflowError


def _untyped(helper: Any) -> Callable[..., Any]:
    """The facade copies (``self.activity(...)``) are untyped; ``dw.activity`` is typed."""
    fn: Callable[..., Any] = helper
    return fn


class Workflow(SagaMixin, Generic[HandleP, HandleR]):
    """Subclass and implement ``handle()``; start it with ``WorkflowStub``.

    Type checkers read ``handle()``'s signature: ``WorkflowStub.make(MyWorkflow)``
    checks ``start()``'s arguments and types ``result()``; so do ``dw.child()``.
    """

    #: Durable type key stored in history; set it explicitly.
    type_key: ClassVar[str | None] = None
    #: Celery queue and named connection for this workflow's tasks.
    queue: ClassVar[str | None] = None
    connection: ClassVar[str | None] = None
    #: Declared signal names.
    signals: ClassVar[list[Any]] = []
    #: Exceptions (classes, or dotted paths, class names or type keys) that fail the run
    #: when ``handle()`` lets them escape. Activity and child failures and
    #: ``NonRetryableError`` always do; anything else fails the workflow task instead, and
    #: the run waits, open, until the code is fixed and the run repaired.
    failure_exception_types: ClassVar[Sequence[type[BaseException] | str]] = ()
    #: What a clock, randomness, environment or I/O call from this workflow's code does:
    #: ``"raise"``, ``"warn"`` or ``"allow"``; ``None`` follows the ``UNSAFE_CALLS`` setting.
    unsafe_calls: ClassVar[Literal["raise", "warn", "allow"] | None] = None
    #: Set on intermediate base classes that should not be registered.
    abstract: ClassVar[bool] = True

    _dw_runtime: WorkflowRuntime | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refuse_async_methods([(f"{cls.__qualname__}.handle()", cls.__dict__.get("handle"))])
        decorators.collect(cls)
        _check_failure_types(cls)
        if cls.unsafe_calls is not None:
            guards.validate_policy(cls.unsafe_calls, f"{cls.__name__}.unsafe_calls")
        if not cls.__dict__.get("abstract", False):
            registry.register_workflow(cls)

    @classmethod
    def _dw_instantiate(cls, runtime: WorkflowRuntime) -> Workflow[..., Any]:
        instance = cls.__new__(cls)
        instance._dw_runtime = runtime
        instance.__init__()  # type: ignore[misc]
        return instance

    def handle(self, *args: HandleP.args, **kwargs: HandleP.kwargs) -> HandleR:
        raise NotImplementedError(f"{type(self).__name__} must implement handle()")

    def _runtime(self) -> WorkflowRuntime:
        runtime = self._dw_runtime or current_runtime()
        if runtime is None:
            raise NotInWorkflowError("this method only works inside a running workflow")
        refuse_async_caller(f"{type(self).__name__} workflow methods")
        return runtime

    def workflow_id(self) -> str:
        """The instance id, stable for the life of the workflow."""
        return self._runtime().workflow_id

    def run_id(self) -> str:
        """The id of the run (execution generation) being executed."""
        return self._runtime().run_id

    def last_child(self) -> ChildWorkflowHandle[Any] | None:
        """A handle on the most recently started child workflow, if any."""
        runtime = self._runtime()
        started = runtime.children()
        return ChildWorkflowHandle(runtime, started[-1]) if started else None

    def children(self) -> list[ChildWorkflowHandle[Any]]:
        """Handles on every child started so far, in step order."""
        runtime = self._runtime()
        return [ChildWorkflowHandle(runtime, op) for op in runtime.children()]

    def messages(self, stream_key: str = DEFAULT_STREAM) -> MessageStream:
        """The message stream ``stream_key`` of this instance."""
        return MessageStream(self._runtime(), stream_key)

    def inbox(self, stream_key: str = DEFAULT_STREAM) -> MessageStream:
        return self.messages(stream_key)

    def outbox(self, stream_key: str = DEFAULT_STREAM) -> MessageStream:
        return self.messages(stream_key)

    def history_length(self) -> int:
        """Events in this run's history at the current point of the body (replay-stable)."""
        return self._runtime().history_length()

    def history_size(self) -> int:
        """Bytes of history payload at the current point of the body (replay-stable)."""
        return self._runtime().history_size()

    def should_continue_as_new(self) -> bool:
        """True once the history budget (CONTINUE_AS_NEW_* settings) is used up."""
        return self._runtime().should_continue_as_new()

    # The in-body helpers, also reachable as ``Workflow.activity(...)`` etc.
    activity = staticmethod(_untyped(helpers.activity))
    execute_activity = staticmethod(_untyped(helpers.execute_activity))
    local_activity = staticmethod(_untyped(helpers.local_activity))
    execute_local_activity = staticmethod(_untyped(helpers.execute_local_activity))
    worker_session = staticmethod(sessions.worker_session)
    timer = staticmethod(helpers.timer)
    seconds = staticmethod(helpers.seconds)
    minutes = staticmethod(helpers.minutes)
    hours = staticmethod(helpers.hours)
    days = staticmethod(helpers.days)
    weeks = staticmethod(helpers.weeks)
    months = staticmethod(helpers.months)
    years = staticmethod(helpers.years)
    side_effect = staticmethod(helpers.side_effect)
    uuid4 = staticmethod(helpers.uuid4)
    uuid7 = staticmethod(helpers.uuid7)
    now = staticmethod(helpers.now)
    info = staticmethod(helpers.info)
    wait = staticmethod(helpers.wait)
    wait_signal = staticmethod(helpers.wait_signal)
    wait_with_timeout = staticmethod(helpers.wait_with_timeout)
    child = staticmethod(_untyped(composition.child))
    execute_child_workflow = staticmethod(_untyped(composition.execute_child_workflow))
    start_child = staticmethod(_untyped(composition.start_child))
    external_workflow = staticmethod(handles.external_workflow)
    all = staticmethod(composition.all)
    parallel = staticmethod(composition.parallel)
    select = staticmethod(composition.select)
    run_async = staticmethod(composition.run_async)
    continue_as_new = staticmethod(composition.continue_as_new)
    all_handlers_finished = staticmethod(sync.all_handlers_finished)
    get_version = staticmethod(helpers.get_version)
    patched = staticmethod(helpers.patched)
    deprecate_patch = staticmethod(helpers.deprecate_patch)
    upsert_memo = staticmethod(helpers.upsert_memo)
    upsert_search_attributes = staticmethod(helpers.upsert_search_attributes)


def _check_failure_types(cls: type) -> None:
    declared = cls.__dict__.get("failure_exception_types", ())
    if isinstance(declared, str | type) or not all(
        (isinstance(entry, type) and issubclass(entry, BaseException))
        or (isinstance(entry, str) and entry.strip())
        for entry in declared
    ):
        raise ConfigurationError(
            f"{cls.__name__}.failure_exception_types must be a list of exception classes or names"
        )
