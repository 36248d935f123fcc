"""Fake mode: ready tasks run inline, in the test's own process, through the real executor.

Nothing is simulated. Workflow, activity and timer tasks are the same rows a
Celery worker would claim; fake mode only decides *when* they run:

* on commit, exactly when production would publish the message (this covers
  tests that really commit: pytest-django's ``transactional_db``, scripts);
* right after a ``WorkflowStub`` command returns, when no transaction of the
  application is open. Inside a ``TestCase`` (or pytest-django's ``db``) the
  test's own transaction never commits, so on-commit hooks never fire there.

Either way only tasks that are *due* run: a timer an hour away stays a
pending row until the test moves the clock and drains again.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connections

from durable_workflow import client_testing, ids, registry
from durable_workflow.exceptions import DurableWorkflowError, UnknownTypeError
from durable_workflow.executor import dispatch, hooks
from durable_workflow.logs import get_logger
from durable_workflow.testing.inline import InlineBackend

if TYPE_CHECKING:
    from durable_workflow.authoring.activity import ActivityContext
    from durable_workflow.store.records import TaskRecord

logger = get_logger("durable_workflow")

_active: WorkflowFake | None = None
_local = threading.local()  # per thread: a drain is running (no nesting)


class LogicError(DurableWorkflowError, TypeError):
    """The testing kit was asked for something it deliberately does not do."""


class ActivityFakeContext:
    """What a mock receives first: the running attempt's identity, as methods."""

    def __init__(self, context: ActivityContext) -> None:
        self._context = context

    def __repr__(self) -> str:
        return (
            f"<ActivityFakeContext workflow={self.workflow_id()!r} "
            f"activity={self.activity_id()!r} attempt={self.attempt_count()}>"
        )

    def workflow_id(self) -> str:
        return self._context.workflow_id

    def run_id(self) -> str:
        return self._context.run_id

    def activity_id(self) -> str:
        """The execution id: stable across retries (the default idempotency key)."""
        return self._context.activity_id

    def attempt_id(self) -> str | None:
        return self._context.attempt_id

    def attempt_count(self) -> int:
        """1 on the first attempt, 2 on the first retry, and so on."""
        return self._context.attempt_count

    def heartbeat(self, details: Any = None) -> bool:
        return bool(self._context.heartbeat(details))


class FakeBackend(InlineBackend):
    """Records every task message and, on commit, drains what is due."""

    def __init__(self, fake: WorkflowFake) -> None:
        super().__init__()
        self.fake = fake
        self.messages: list[TaskRecord] = []

    def send(self, task: TaskRecord, countdown: float | None) -> None:
        super().send(task, countdown)
        self.messages.append(task)
        try:
            self.fake.drain()
        except BaseException as exc:  # on-commit hooks swallow errors: keep it for later
            logger.exception("fake mode: running ready tasks failed")
            self.fake.error = self.fake.error or exc


class WorkflowFake:
    """The active fake mode; ``restore()`` (or leaving the ``with`` block) undoes it."""

    def __init__(self, *, skip_time: bool = False) -> None:
        #: Drains after commands (and ``run_ready_tasks()``) skip time (``skipping.py``).
        self.skip_time = skip_time
        self.backend = FakeBackend(self)
        self.error: BaseException | None = None
        self.since = _watermark()
        self.active = True
        self._previous_backend = dispatch.set_backend(self.backend)
        self._previous_mocks = dict(hooks.activity_mocks)
        self._previous_workflow_mocks = dict(hooks.workflow_mocks)
        hooks.activity_mocks.clear()
        hooks.workflow_mocks.clear()

    def __enter__(self) -> WorkflowFake:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def __repr__(self) -> str:
        state = "active" if self.active else "restored"
        mocks = len(hooks.activity_mocks) + len(hooks.workflow_mocks)
        return f"<WorkflowFake {state}, {mocks} mock(s)>"

    # --------------------------------------------------------------- mocks
    def mock(self, target: type | str, value: Any) -> None:
        """Replace an activity's ``handle()`` by a value or a callable ``(context, *args)``,
        or a workflow's by a value, an exception or a callable ``(info, *args)``."""
        self._check_active()
        workflow = _workflow_target(target)
        if workflow is not None:
            hooks.workflow_mocks[str(workflow.type_key)] = _mocked_workflow(workflow, value)
            return
        hooks.activity_mocks[activity_key(target)] = _as_mock(value)

    # -------------------------------------------------------------- running
    def drain(self) -> int:
        """Run every ready, due task (the clock never moves); nested calls do nothing."""
        from durable_workflow.testing.inline import run_ready_tasks

        if getattr(_local, "draining", False):
            return 0
        _local.draining = True
        try:
            return run_ready_tasks()
        finally:
            _local.draining = False

    def run_ready_tasks(self, *, skip_time: bool | None = None) -> int:
        """``drain()`` (skipping time, by default when the fake does), then surface an
        error an on-commit drain had to swallow."""
        from durable_workflow.testing.skipping import run_skipping

        skip = self.skip_time if skip_time is None else skip_time
        ran = run_skipping(self.drain) if skip else self.drain()
        self.raise_pending_error()
        return ran

    def after_command(self) -> bool:
        """Drain after a client command, unless an application transaction is still open."""
        self.raise_pending_error()
        if getattr(_local, "draining", False) or application_transaction_open():
            return False
        self.run_ready_tasks()
        return True

    def raise_pending_error(self) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error

    def forget_dispatches(self) -> None:
        """Start counting dispatches, signals and updates afresh from now on."""
        self.since = _watermark()

    # ------------------------------------------------------------- teardown
    def restore(self) -> None:
        """Put the previous dispatch backend and activity mocks back (idempotent)."""
        global _active
        if not self.active:
            return
        self.active = False
        dispatch.set_backend(self._previous_backend)
        hooks.activity_mocks.clear()
        hooks.activity_mocks.update(self._previous_mocks)
        hooks.workflow_mocks.clear()
        hooks.workflow_mocks.update(self._previous_workflow_mocks)
        if _active is self:
            _active = None
            client_testing.install(None)

    def _check_active(self) -> None:
        if not self.active:
            raise LogicError("this WorkflowFake was restored; call WorkflowStub.fake() again")


def start(*, skip_time: bool = False) -> WorkflowFake:
    """Enter fake mode (leaving any fake mode already active first)."""
    global _active
    if _active is not None:
        _active.restore()
    _active = WorkflowFake(skip_time=skip_time)
    client_testing.install(_active)  # the stub's commands drain through it now
    return _active


def active() -> WorkflowFake | None:
    return _active


def require_active(what: str) -> WorkflowFake:
    if _active is None:
        raise LogicError(f"{what} only works in fake mode: call WorkflowStub.fake() first")
    return _active


def restore() -> None:
    if _active is not None:
        _active.restore()


def application_transaction_open() -> bool:
    """True inside an ``atomic()`` block of the code under test (not the test's own)."""
    for conn in connections.all(initialized_only=True):
        for block in getattr(conn, "atomic_blocks", []):
            if not getattr(block, "_from_testcase", False):
                return True
    return False


def activity_key(target: type | str) -> str:
    """The activity type key a mock or an assertion is about."""
    from durable_workflow.authoring.activity import Activity
    from durable_workflow.authoring.workflow import Workflow

    if isinstance(target, type) and issubclass(target, Workflow):
        raise LogicError(
            f"{target.__name__} is a Workflow, and only activities can be dispatch-asserted. "
            "In fake mode child workflows run as real nested runs (or as mocks, see "
            "WorkflowStub.mock): test them through their observable output (result, status, "
            "history) instead."
        )
    if isinstance(target, type) and issubclass(target, Activity):
        key = getattr(target, "type_key", None)
        if not key:
            raise LogicError(f"{target.__name__} has no type_key (is it abstract?)")
        return str(key)
    if isinstance(target, str) and target.strip():
        if _is_workflow_key(target) and not _is_activity_key(target):
            raise LogicError(
                f"{target!r} is the type key of a workflow, and only activities can be "
                "dispatch-asserted; test child workflows through their observable output."
            )
        return target
    raise TypeError(f"expected an Activity subclass or an activity type key, not {target!r}")


def _workflow_target(target: type | str) -> Any:
    """The workflow class a mock is about, or ``None`` (an activity)."""
    from durable_workflow.authoring.workflow import Workflow

    if isinstance(target, type) and issubclass(target, Workflow):
        if not getattr(target, "type_key", None):
            raise LogicError(f"{target.__name__} has no type_key (is it abstract?)")
        return registry.workflow_class(str(target.type_key))
    if isinstance(target, str) and _is_workflow_key(target) and not _is_activity_key(target):
        return registry.workflow_class(target)
    return None


def _mocked_workflow(cls: Any, value: Any) -> type:
    """A subclass of ``cls`` whose ``handle()`` returns ``value``, raises it, or calls it
    with ``dw.info()`` and the arguments; any exception it raises fails the run. Not
    registered: only the kit's hook finds it."""
    from durable_workflow.authoring.helpers import info

    def handle(self: Any, *args: Any) -> Any:
        if isinstance(value, BaseException):
            raise value
        if callable(value):
            return value(info(), *args)
        return value

    namespace = {
        "abstract": True,
        "handle": handle,
        "__module__": cls.__module__,
        # What the mock raises is the child's failure, never a bug to park the run on.
        "failure_exception_types": (Exception,),
    }
    return type(f"{cls.__name__}Mock", (cls,), namespace)


def _is_workflow_key(key: str) -> bool:
    try:
        registry.workflow_class(key)
    except UnknownTypeError:
        return False
    return True


def _is_activity_key(key: str) -> bool:
    try:
        registry.activity_class(key)
    except UnknownTypeError:
        return False
    return True


def _as_mock(value: Any) -> Callable[..., Any]:
    """What the executor's hook calls: ``(ActivityContext, *args) -> result``."""
    if isinstance(value, BaseException):

        def raising(context: ActivityContext, *args: Any) -> Any:
            raise value

        return raising
    if callable(value):

        def calling(context: ActivityContext, *args: Any) -> Any:
            return value(ActivityFakeContext(context), *args)

        return calling
    return lambda context, *args: value


def _watermark() -> uuid.UUID:
    """The smallest time-ordered id that can be minted from this millisecond on."""
    return ids.uuid7(unix_ms=int(time.time() * 1000), rand=bytes(10))
