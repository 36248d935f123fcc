"""The golden history with headers (scenario ``headers``) replays clean, and workflow
interceptors see the recorded headers on replay, whatever they would add today."""

from __future__ import annotations

import pathlib

from django.conf import settings
from django.test import override_settings

from durable_workflow.testing import Replayer
from tests.testapp import tenancy

GOLDEN = pathlib.Path(__file__).parent / "histories" / "headers.json"
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-01"


def test_inbound_interceptors_see_the_recorded_headers_on_replay():
    tenancy.CALLS.clear()
    configured = {**settings.DURABLE_WORKFLOW, "INTERCEPTORS": [tenancy.Outer]}
    with override_settings(DURABLE_WORKFLOW=configured):
        result = Replayer().replay(GOLDEN)
    assert result.closed_by == "WorkflowCompleted"
    inbound = [(m, d) for _, m, d in tenancy.CALLS if m.startswith("handle_")]
    start = {"tenant": "acme", "traceparent": TRACE}
    assert inbound == [
        ("handle_workflow", start),
        ("handle_update", ("rename", {**start, "request-id": "u-1"})),
        ("handle_signal", ("poke", {**start, "request-id": "s-1"})),
    ]
    # The outbound interceptor ran again on replay; what it adds now is not recorded.
    assert ("outer", "schedule_activity", "tests.tenancy.whoami") in tenancy.CALLS
    tenancy.CALLS.clear()
