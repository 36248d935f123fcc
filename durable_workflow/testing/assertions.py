"""Assertions about what was dispatched, signalled and updated, with messages that show it.

Each failure message lists what *was* recorded, so a failing test explains
itself. Callbacks receive decoded arguments: activities ``callback(*args)``,
signals and updates ``callback(instance_id, *args)``; they return a bool.
Signals and updates count when they were accepted; rejected ones are listed
in the messages (marked) but never counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from durable_workflow.testing import dispatches
from durable_workflow.testing.dispatches import Dispatch
from durable_workflow.testing.fake import activity_key

Callback = Callable[..., Any] | None


def _times(count: int) -> str:
    return "1 time" if count == 1 else f"{count} times"


def _listing(title: str, items: Sequence[Dispatch]) -> str:
    from durable_workflow.testing import fake

    scope = " since WorkflowStub.fake()" if fake.active() is not None else ""
    if not items:
        return f"No {title} were recorded{scope}."
    lines = "\n".join(f"  - {item.describe()}" for item in items)
    return f"{title.capitalize()} recorded{scope} ({len(items)}):\n{lines}"


def _passes(item: Dispatch, callback: Callback, *, with_instance: bool) -> bool:
    if callback is None:
        return True
    args = [item.instance_id, *item.arguments] if with_instance else item.arguments
    return bool(callback(*args))


# ------------------------------------------------------------------ activities
def _activities(target: type | str) -> tuple[str, list[Dispatch], list[Dispatch]]:
    key = activity_key(target)
    everything = dispatches.activities()
    return key, [d for d in everything if d.name == key], everything


def assert_dispatched(target: type | str, callback: Callback | int = None) -> None:
    """At least one call of the activity (passing ``callback``) was scheduled."""
    if isinstance(callback, int) and not isinstance(callback, bool):
        assert_dispatched_times(target, callback)  # the legacy ``(activity, times)`` form
        return
    if isinstance(callback, bool):
        raise TypeError("assert_dispatched() takes a callback or a number of times")
    key, matches, everything = _activities(target)
    if not matches:
        raise AssertionError(
            f"The expected activity [{key}] was not dispatched.\n"
            + _listing("activity dispatches", everything)
        )
    if callback is not None and not any(_passes(d, callback, with_instance=False) for d in matches):
        raise AssertionError(
            f"The expected activity [{key}] was dispatched {_times(len(matches))}, but never "
            "with arguments that pass the callback.\n" + _listing("activity dispatches", matches)
        )


def assert_dispatched_times(target: type | str, times: int) -> None:
    """The activity was scheduled exactly ``times`` times (a retried call counts once)."""
    key, matches, everything = _activities(target)
    if len(matches) != times:
        raise AssertionError(
            f"The expected activity [{key}] was dispatched {_times(len(matches))} "
            f"instead of {_times(times)}.\n" + _listing("activity dispatches", everything)
        )


def assert_not_dispatched(target: type | str, callback: Callback = None) -> None:
    """No call of the activity (passing ``callback``, when given) was scheduled."""
    key, matches, _ = _activities(target)
    offending = [d for d in matches if _passes(d, callback, with_instance=False)]
    if offending:
        which = " with arguments that pass the callback" if callback is not None else ""
        raise AssertionError(
            f"The unexpected activity [{key}] was dispatched{which} "
            f"{_times(len(offending))}.\n" + _listing("matching dispatches", offending)
        )


def assert_nothing_dispatched() -> None:
    """No activity at all was scheduled."""
    everything = dispatches.activities()
    if everything:
        raise AssertionError(
            f"Expected no activities to be dispatched, but {len(everything)} were.\n"
            + _listing("activity dispatches", everything)
        )


# ------------------------------------------------------------ signals, updates
def _sent(
    records: list[Dispatch], name: str, callback: Callback
) -> tuple[list[Dispatch], list[Dispatch]]:
    named = [r for r in records if r.name == name and r.accepted]
    return named, [r for r in named if _passes(r, callback, with_instance=True)]


def _assert_sent(kind: str, records: list[Dispatch], name: str, callback: Callback) -> None:
    named, passing = _sent(records, name, callback)
    if not named:
        rejected = [r for r in records if r.name == name and not r.accepted]
        note = f" (it was rejected {_times(len(rejected))})" if rejected else ""
        raise AssertionError(
            f"The expected {kind} [{name}] was not sent{note}.\n" + _listing(f"{kind}s", records)
        )
    if not passing:
        raise AssertionError(
            f"The expected {kind} [{name}] was sent {_times(len(named))}, but never with "
            "arguments that pass the callback.\n" + _listing(f"{kind}s", named)
        )


def _assert_sent_times(kind: str, records: list[Dispatch], name: str, times: int) -> None:
    named, _ = _sent(records, name, None)
    if len(named) != times:
        raise AssertionError(
            f"The expected {kind} [{name}] was sent {_times(len(named))} instead of "
            f"{_times(times)}.\n" + _listing(f"{kind}s", records)
        )


def _assert_not_sent(kind: str, records: list[Dispatch], name: str, callback: Callback) -> None:
    _, passing = _sent(records, name, callback)
    if passing:
        which = " with arguments that pass the callback" if callback is not None else ""
        raise AssertionError(
            f"The unexpected {kind} [{name}] was sent{which} {_times(len(passing))}.\n"
            + _listing(f"matching {kind}s", passing)
        )


def assert_signal_sent(name: str, callback: Callback = None) -> None:
    _assert_sent("signal", dispatches.signals(), name, callback)


def assert_signal_sent_times(name: str, times: int) -> None:
    _assert_sent_times("signal", dispatches.signals(), name, times)


def assert_signal_not_sent(name: str, callback: Callback = None) -> None:
    _assert_not_sent("signal", dispatches.signals(), name, callback)


def assert_update_sent(name: str, callback: Callback = None) -> None:
    _assert_sent("update", dispatches.updates(), name, callback)


def assert_update_sent_times(name: str, times: int) -> None:
    _assert_sent_times("update", dispatches.updates(), name, times)


def assert_update_not_sent(name: str, callback: Callback = None) -> None:
    _assert_not_sent("update", dispatches.updates(), name, callback)
