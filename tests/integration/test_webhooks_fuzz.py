"""Hypothesis fuzz of webhook bodies and ids: never a 500, never a partial row."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_workflow import WorkflowStub
from durable_workflow.engine.events import EventType
from durable_workflow.models import HistoryEvent, WorkflowCommand, WorkflowRun
from tests.conftest import scaled
from tests.integration.test_webhooks import row_counts

pytestmark = pytest.mark.django_db

SPEC_CODES = {200, 202, 401, 404, 409, 422}
FIELDS = [
    "workflow_id",
    "order_id",
    "priority",
    "on_duplicate",
    "visibility",
    "arguments",
    "signal_arguments",
    "wait_for",
    "wait_timeout_seconds",
    "reason",
    "workflow_type",
    "instance_id",
    "business_key",
    "labels",
    "memo",
    "duplicate_start_policy",
]
ROUTES = [
    "start/order-workflow",
    "start/order-workflow/signals/approved-by",
    "start/order-workflow/signals/typed",
    "control-plane/start",
    "instances/{id}/signals/{name}",
    "instances/{id}/runs/{run}/signals/{name}",
    "instances/{id}/queries/{name}",
    "instances/{id}/runs/{run}/queries/{name}",
    "instances/{id}/updates/{name}",
    "instances/{id}/runs/{run}/updates/{name}",
    "instances/{id}/cancel",
    "instances/{id}/terminate",
    "instances/{id}/repair",
    "instances/{id}/runs/{run}/repair",
]
NAMES = ["approved-by", "typed", "mark-ready", "fail", "current-stage", "events-starting-with"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(
        ["fuzz-1", "accepted", "completed", "return_existing_active", "webhooks.order"]
    )
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=10) | st.sampled_from(FIELDS), children, max_size=4)
    ),
    max_leaves=12,
)
bodies = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), json_values, max_size=6)
ids = st.sampled_from(["fuzz-1", "missing", "bad id", "a" * 200, "fuzz-1.%2F"]) | st.text(
    min_size=1, max_size=20
)
run_ids = st.sampled_from(["current", "not-a-uuid", "01a22724-dcfc-7872-bc9f-b4556a9afc5e"])


@pytest.fixture(autouse=True)
def _open_webhooks(settings, inline):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}


@pytest.fixture
def target():
    stub = WorkflowStub.make("webhooks.order", "fuzz-1")
    stub.start(1)
    return stub


def assert_consistent() -> None:
    """Every run has its start command and its first two events; no command is half-made."""
    for run in WorkflowRun.objects.all():
        types = list(
            HistoryEvent.objects.filter(run=run).order_by("sequence").values_list("event_type")[:2]
        )
        assert [t for (t,) in types] == [EventType.START_ACCEPTED, EventType.WORKFLOW_STARTED]
        assert WorkflowCommand.objects.filter(run=run, command_type="start").exists()
    accepted_starts = WorkflowCommand.objects.filter(command_type="start", status="accepted")
    assert not accepted_starts.filter(run__isnull=True).exists()


def check(response: Any, before: dict[str, int]) -> None:
    assert response.status_code in SPEC_CODES, (response.status_code, response.content[:500])
    body = json.loads(response.content)
    assert isinstance(body, dict)
    if "command_id" not in body and "started" not in body and "query_name" not in body:
        assert row_counts() == before, body  # a plain error envelope wrote nothing
    assert_consistent()


def url_for(template: str, instance_id: str, run: str, name: str, stub: Any) -> str:
    run_id = stub.run_id() if run == "current" else run
    return "/webhooks/" + template.format(
        id=quote(instance_id, safe=""), run=run_id, name=quote(name, safe="")
    )


FUZZ = settings(
    max_examples=scaled(120),
    deadline=None,
    database=None,  # nothing written into the work tree; failures print their example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(
    template=st.sampled_from(ROUTES),
    instance_id=ids,
    run=run_ids,
    name=st.sampled_from(NAMES) | st.text(min_size=1, max_size=12),
    body=bodies,
)
def test_json_bodies_and_ids_never_500(client, target, template, instance_id, run, name, body):
    before = row_counts()
    url = url_for(template, instance_id, run, name, target)
    response = client.post(url, data=json.dumps(body), content_type="application/json")
    check(response, before)


@FUZZ
@given(template=st.sampled_from(ROUTES), raw=st.binary(max_size=300))
def test_random_bytes_never_500(client, target, template, raw):
    before = row_counts()
    url = url_for(template, "fuzz-1", "current", "approved-by", target)
    response = client.post(
        url, data=raw, content_type="application/json", CONTENT_TYPE="application/json"
    )
    check(response, before)


@FUZZ
@given(
    template=st.sampled_from(ROUTES),
    value=json_values,
    field=st.sampled_from(FIELDS),
)
def test_wrong_types_in_known_fields_never_500(client, target, template, value, field):
    before = row_counts()
    url = url_for(template, "fuzz-1", "current", "mark-ready", target)
    body = {"workflow_id": "fuzz-new", "order_id": 1, field: value}
    response = client.post(url, data=json.dumps(body), content_type="application/json")
    check(response, before)


@pytest.mark.parametrize("template", ROUTES)
def test_deep_nesting_and_huge_bodies_are_422(client, target, template):
    url = url_for(template, "fuzz-1", "current", "approved-by", target)
    before = row_counts()
    deep = "[" * 100_000 + "]" * 100_000
    for raw in (
        deep,
        '{"arguments": ' + "[" * 40 + "]" * 40 + "}",
        json.dumps({"arguments": ["x" * (2 * 1024 * 1024)]}),
        '{"arguments": [1e999]}',
        '{"arguments": [' + "9" * 5000 + "]}",
    ):
        response = client.post(
            url, data=raw, content_type="application/json", CONTENT_TYPE="application/json"
        )
        assert response.status_code == 422, (raw[:40], response.content[:300])
        check(response, before)
