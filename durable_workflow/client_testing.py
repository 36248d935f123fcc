"""The stub's testing face, and the seam the testing kit's fake mode plugs into.

The client does not build on the testing kit; the kit builds on this module. Fake mode
(``durable_workflow.testing.fake``) installs an :class:`InlineRunner` while it is active,
and the stub's command methods, marked with the decorators below, ask that runner to
run the tasks a command made ready before the command returns. With no runner
installed each decorator costs one ``None`` check.

``WorkflowStub.fake()``, ``.mock()``, ``.assert_*()`` and the other class methods of
:class:`StubTesting` are the kit's documented entry points; they load the kit when
first called, so code that never tests never imports it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from durable_workflow.testing.fake import WorkflowFake

F = TypeVar("F", bound=Callable[..., Any])


class InlineRunner(Protocol):
    """Something that runs ready tasks in the calling process (fake mode)."""

    def after_command(self) -> bool:
        """Run what the last command made ready; ``True`` when it ran (the stub then
        reads its run again), ``False`` when it could not run now (an application
        transaction is still open, or a drain is already running)."""
        ...


_runner: InlineRunner | None = None
_local = threading.local()  # per thread: an update is waiting for its result


def install(runner: InlineRunner | None) -> None:
    """Make ``runner`` the one the stub's commands ask (``None``: none)."""
    global _runner
    _runner = runner


def installed() -> InlineRunner | None:
    return _runner


# ------------------------------------------------------------ command decorators
def drains_after(method: F) -> F:
    """After the command, the runner runs what it made ready, and the stub reads its run."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        runner = _runner
        if runner is not None and runner.after_command():
            self.refresh()
        return result

    return wrapper  # type: ignore[return-value]


def update_waits_inline(method: F) -> F:
    """With a runner the update is applied inline, so waiting longer cannot help."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _runner is None:
            return method(self, *args, **kwargs)
        if kwargs.get("wait_timeout") is None:
            kwargs["wait_timeout"] = 0.0
        _local.waiting = True
        try:
            return method(self, *args, **kwargs)
        finally:
            _local.waiting = False

    return wrapper  # type: ignore[return-value]


def drains_before_inspect(method: F) -> F:
    """An update's caller polling for its result: run what is ready first."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        runner = _runner
        if runner is not None and getattr(_local, "waiting", False):
            runner.after_command()
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def waits_inline(method: F) -> F:
    """``stub.wait()`` with a runner: nothing runs in the background, so run once."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        runner = _runner
        if runner is None:
            return method(self, *args, **kwargs)
        runner.after_command()
        return self.refresh()

    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------- the stub's face
class StubTesting:
    """Class-level testing helpers: ``WorkflowStub.fake()``, ``.mock()``, ``.assert_*()``."""

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
        return _runner is not None

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
