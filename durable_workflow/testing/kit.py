"""The test-kit half of ``WorkflowStub``: fake mode, mocks and assertions.

Mixed into ``WorkflowStub`` so tests can write ``WorkflowStub.fake()``. The
mixin also wraps the stub's command methods (start, signal, update, cancel,
...) so that, in fake mode only, the tasks a command made ready run before it
returns. Outside fake mode the wrappers are a single ``None`` check.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from durable_workflow.testing.fake import WorkflowFake

F = TypeVar("F", bound=Callable[..., Any])

#: Commands after which ready tasks run inline (the methods the others delegate to).
_DRAIN_AFTER = (
    "attempt_start",
    "attempt_signal_with_arguments",
    "signal_with_start",
    "submit_update_with_start",
    "submit_update",
    "attempt_cancel",
    "attempt_terminate",
    "repair",
)

_local = threading.local()  # per thread: an update is waiting for its result


def _active() -> WorkflowFake | None:
    from durable_workflow.testing import fake

    return fake.active()


def _drains_after(method: F) -> F:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        current = _active()
        if current is not None and current.after_command():
            self.refresh()
        return result

    return wrapper  # type: ignore[return-value]


def _update_waits_inline(method: F) -> F:
    """In fake mode the update is applied inline, so waiting longer cannot help."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _active() is None:
            return method(self, *args, **kwargs)
        if kwargs.get("wait_timeout") is None:
            kwargs["wait_timeout"] = 0.0
        _local.waiting = True
        try:
            return method(self, *args, **kwargs)
        finally:
            _local.waiting = False

    return wrapper  # type: ignore[return-value]


def _drains_before_inspect(method: F) -> F:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        current = _active()
        if current is not None and getattr(_local, "waiting", False):
            current.after_command()
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _waits_inline(method: F) -> F:
    """``stub.wait()`` in fake mode: nothing runs in the background, so drain once."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        current = _active()
        if current is None:
            return method(self, *args, **kwargs)
        current.after_command()
        return self.refresh()

    return wrapper  # type: ignore[return-value]


_WRAPPERS: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(_DRAIN_AFTER, _drains_after),
    "attempt_update_with_arguments": _update_waits_inline,
    "attempt_update_with_start": _update_waits_inline,
    "inspect_update": _drains_before_inspect,
    "wait": _waits_inline,
}


class StubTestKit:
    """Class-level testing helpers: ``WorkflowStub.fake()``, ``.mock()``, ``.assert_*()``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, wrap in _WRAPPERS.items():
            method = getattr(cls, name, None)  # also the methods of StubMessages
            if method is not None and not hasattr(method, "__wrapped__"):
                setattr(cls, name, wrap(method))

    # ------------------------------------------------------------ fake mode
    @classmethod
    def fake(cls, *, skip_time: bool = False) -> WorkflowFake:
        """Run ready tasks inline from now on; returns a handle usable with ``with``.

        With ``skip_time`` every drain jumps the engine clock to the next due timer (or
        back-off, or deadline) whenever nothing else is ready, until nothing is left.
        """
        from durable_workflow.testing import fake

        return fake.start(skip_time=skip_time)

    @classmethod
    def restore(cls) -> None:
        """Leave fake mode: the Celery backend and real activities come back."""
        from durable_workflow.testing import fake

        fake.restore()

    @classmethod
    def is_fake(cls) -> bool:
        return _active() is not None

    @classmethod
    def mock(cls, target: type | str, value: Any) -> None:
        """Replace an activity by a value, an exception to raise, or ``fn(context, *args)``."""
        from durable_workflow.testing import fake

        fake.require_active("WorkflowStub.mock()").mock(target, value)

    @classmethod
    def run_ready_tasks(cls, *, skip_time: bool | None = None) -> int:
        """Run the tasks that are ready and due now; the clock does not move, unless
        ``skip_time`` (by default: as ``fake(skip_time=...)`` said) lets it jump to each
        next due timer while nothing else is ready."""
        from durable_workflow.testing import fake
        from durable_workflow.testing.inline import run_ready_tasks
        from durable_workflow.testing.skipping import run_skipping

        current = fake.active()
        if current is not None:
            return current.run_ready_tasks(skip_time=skip_time)
        return run_skipping(run_ready_tasks) if skip_time else run_ready_tasks()

    # ----------------------------------------------------------- assertions
    @classmethod
    def assert_dispatched(cls, target: type | str, callback: Any = None) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_dispatched(target, callback)

    @classmethod
    def assert_dispatched_times(cls, target: type | str, times: int) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_dispatched_times(target, times)

    @classmethod
    def assert_not_dispatched(cls, target: type | str, callback: Any = None) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_not_dispatched(target, callback)

    @classmethod
    def assert_nothing_dispatched(cls) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_nothing_dispatched()

    @classmethod
    def assert_signal_sent(cls, name: str, callback: Any = None) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_signal_sent(name, callback)

    @classmethod
    def assert_signal_sent_times(cls, name: str, times: int) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_signal_sent_times(name, times)

    @classmethod
    def assert_signal_not_sent(cls, name: str, callback: Any = None) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_signal_not_sent(name, callback)

    @classmethod
    def assert_update_sent(cls, name: str, callback: Any = None) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_update_sent(name, callback)

    @classmethod
    def assert_update_sent_times(cls, name: str, times: int) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_update_sent_times(name, times)

    @classmethod
    def assert_update_not_sent(cls, name: str, callback: Any = None) -> None:
        from durable_workflow.testing import assertions

        assertions.assert_update_not_sent(name, callback)
