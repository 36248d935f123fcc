"""``check_headers``: what a header map may hold (no database)."""

from __future__ import annotations

import pytest

from durable_workflow.exceptions import InvalidHeaderError
from durable_workflow.headers import check_headers, stored, with_headers


def test_plain_maps_pass_as_plain_copies():
    given = {"tenant": "acme", "note": "a\tb\nc", "empty": "", "accent": "café"}
    checked = check_headers(given)
    assert checked == given and checked is not given
    assert check_headers(None) == {}


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"ten\tant": "x"}, "control character"),  # tabs are for values only
        ({"": "x"}, "must not be empty"),
        ({"k" * 256: "x"}, "at most 255"),
        ({"k": "\x1b[31m"}, "control character"),
        ({"k": "\udcff"}, "lone surrogate"),
    ],
)
def test_what_is_refused(headers, why):
    with pytest.raises(InvalidHeaderError, match=why):
        check_headers(headers)


def test_events_without_headers_stay_as_they_were():
    assert with_headers({"a": 1}, {}) == {"a": 1}
    assert with_headers({"a": 1}, {"t": "x"}) == {"a": 1, "headers": {"t": "x"}}
    assert stored({"a": 1}) == {} and stored(None) == {}
    assert stored({"headers": {"t": "x"}}) == {"t": "x"}
