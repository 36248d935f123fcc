"""The compatibility rule itself: which markers a process supports, what they may claim."""

from __future__ import annotations

import pytest

from durable_workflow.compatibility import (
    mismatch_reason,
    normalize,
    supported_markers,
    supports,
)


@pytest.mark.parametrize(
    "current, supported, expected",
    [
        (None, [], ()),
        ("b2", [], ("b2",)),  # supported unset: just the current marker
        ("b2", ["b2", "b1", "b2"], ("b2", "b1")),
        ("b2", ["b1"], ("b1",)),  # an explicit list replaces current
        ("b2", ["b1", "*"], ("*",)),
        (" b2 ", [" ", ""], ("b2",)),
    ],
)
def test_supported_markers(current, supported, expected):
    assert supported_markers(current, supported) == expected


@pytest.mark.parametrize(
    "markers, required, allowed",
    [
        (("b1",), "b2", False),
        (("b1",), "b1", True),
        (("b1",), None, True),  # unmarked tasks: any worker
        (("b1",), "", True),
        ((), None, True),
        ((), "b1", False),  # an unconfigured worker claims only unmarked tasks
        (("*",), "b9", True),
    ],
)
def test_supports(markers, required, allowed):
    assert supports(markers, required) is allowed
    assert (mismatch_reason(markers, required) is None) is allowed


def test_mismatch_reason_names_both_sides():
    assert (
        mismatch_reason(("b1",), "b2") == "requires compatibility 'b2'; this worker supports [b1]"
    )
    assert mismatch_reason((), "b2").endswith("[none]")


def test_normalize():
    assert normalize("  b1 ") == "b1"
    assert normalize("") is None and normalize(None) is None and normalize(3) is None
