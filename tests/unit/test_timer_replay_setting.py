"""``TIMER_REPLAY_IN_PLACE_MAX_EVENTS`` is a count of events: an integer >= 0."""

from __future__ import annotations

import pytest
from django.test import override_settings

from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError


@pytest.mark.parametrize("bad", [-1, True, 2.5, "50", None])
def test_the_setting_is_an_integer(bad: object) -> None:
    with (
        override_settings(DURABLE_WORKFLOW={"TIMER_REPLAY_IN_PLACE_MAX_EVENTS": bad}),
        pytest.raises(ConfigurationError, match="TIMER_REPLAY_IN_PLACE_MAX_EVENTS"),
    ):
        get_settings()


@pytest.mark.parametrize("good", [0, 1, 50, 10_000])
def test_zero_and_counts_are_accepted(good: int) -> None:
    with override_settings(DURABLE_WORKFLOW={"TIMER_REPLAY_IN_PLACE_MAX_EVENTS": good}):
        configured = get_settings().TIMER_REPLAY_IN_PLACE_MAX_EVENTS
    assert configured == good


def test_fifty_events_by_default() -> None:
    with override_settings(DURABLE_WORKFLOW={}):
        assert get_settings().TIMER_REPLAY_IN_PLACE_MAX_EVENTS == 50
