"""Admin pages for every engine model: lists, filters, search, details, timeline, queries."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from durable_workflow import StartOptions, WorkflowStub, clock
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    ChildCall,
    HistoryEvent,
    Task,
    Timer,
    WorkerRegistration,
    WorkerSession,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowInstance,
    WorkflowMessage,
    WorkflowRun,
    WorkflowSignal,
    WorkflowUpdate,
)
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = [
    WorkflowInstance,
    WorkflowRun,
    HistoryEvent,
    Task,
    ActivityExecution,
    ActivityAttempt,
    Timer,
    ChildCall,
    WorkflowCommand,
    WorkflowFailure,
    WorkflowSignal,
    WorkflowUpdate,
    WorkerRegistration,
    WorkerSession,
    WorkflowMessage,
]


def url(model, view: str = "changelist", *args) -> str:
    return reverse(f"admin:durable_workflow_{model._meta.model_name}_{view}", args=args)


def user_with(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password="x", is_staff=True)
    perms = Permission.objects.filter(
        content_type__app_label="durable_workflow", codename__in=codenames
    )
    assert perms.count() == len(codenames), codenames
    user.user_permissions.add(*perms)
    return user


VIEW_ALL = tuple(f"view_{m._meta.model_name}" for m in MODELS)


@pytest.fixture
def viewer(client):
    client.force_login(user_with("viewer", *VIEW_ALL))
    return client


@pytest.fixture
def world(inline):
    """One of everything: completed, failed-and-caught, waiting, parent/child, continued."""
    done = start("tests.sequential", "adm-done", "ada")
    caught = start("tests.catch-failure", "adm-caught")
    waiting = WorkflowStub.make("tests.approval", "adm-waiting")
    waiting.start(
        "signal",
        options=StartOptions()
        .with_business_key("order-77")
        .with_search_attributes({"customer": "acme-corp"}),
    )
    parent = start("tests.parent", "adm-parent", "simple")
    looper = start("tests.looper", "adm-looper", 2)
    sleeper = start("tests.sleeper", "adm-sleeper", 3600)
    updates = start("tests.approval", "adm-updates", "updates")
    start("tests.session-steps", "adm-session", 1, {"queue": "gpu"}, "adm-render")
    inline.run()
    waiting.signal("ping", "early")
    looper.signal("tick")
    inline.run()
    updates.submit_update("add-item", "one")
    inline.run()
    now = clock.now()
    WorkerRegistration.objects.create(
        worker_id="celery@host-1:42",
        hostname="host-1",
        pid=42,
        queues=["celery", "payments"],
        started_at=now,
        last_heartbeat_at=now,
    )
    WorkflowMessage.objects.get_or_create(
        target_instance_id="adm-waiting",
        stream_key="chat",
        sequence=1,
        defaults={"payload_reference": "s3://bucket/1", "created_at": now},
    )
    return {
        "done": done,
        "caught": caught,
        "waiting": waiting,
        "parent": parent,
        "looper": looper,
        "sleeper": sleeper,
    }


def filter_links(html: str) -> list[str]:
    section = html.split('id="changelist-filter"', 1)
    if len(section) < 2:
        return []
    return sorted(set(re.findall(r'href="(\?[^"]*)"', section[1].split("</nav>")[0])))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.model_name)
def test_list_filters_search_and_detail(viewer, world, model):
    changelist = url(model)
    response = viewer.get(changelist)
    assert response.status_code == 200
    links = filter_links(response.content.decode())
    assert links, "every list has filters"
    for query in links:
        assert viewer.get(changelist + query.replace("&amp;", "&")).status_code == 200, query
    run_id = world["done"].run_id()
    for term in ("adm-done", run_id, "nothing-matches"):
        assert viewer.get(changelist, {"q": term}).status_code == 200
    obj = model.objects.first()
    assert obj is not None
    detail = viewer.get(url(model, "change", obj.pk))
    assert detail.status_code == 200
    assert b"Save" not in detail.content  # read-only


def test_nobody_without_view_permission_sees_a_thing(client, world):
    client.force_login(User.objects.create_user("stranger", password="x", is_staff=True))
    for model in MODELS:
        assert client.get(url(model)).status_code == 403
    run = WorkflowRun.objects.first()
    assert client.get(url(WorkflowRun, "timeline", run.pk)).status_code == 403


def test_run_search_by_instance_business_key_run_id_and_attributes(viewer, world):
    changelist = url(WorkflowRun)
    waiting = world["waiting"]

    def found(term: str) -> set[str]:
        response = viewer.get(changelist, {"q": term})
        return set(re.findall(r">(adm-[a-z-]+)<", response.content.decode()))

    assert found("adm-waiting") == {"adm-waiting"}
    assert found("order-77") == {"adm-waiting"}
    assert found(waiting.run_id()) == {"adm-waiting"}
    assert found("acme-corp") == {"adm-waiting"}
    assert "adm-looper" in found("adm-loo")  # prefix
    assert found("no-such-thing") == set()


def test_run_filters(viewer, world):
    changelist = url(WorkflowRun)
    completed = viewer.get(changelist, {"status": "completed"}).content.decode()
    assert "adm-done" in completed and "adm-waiting" not in completed
    by_type = viewer.get(changelist, {"workflow_type": "tests.sleeper"}).content.decode()
    assert "adm-sleeper" in by_type and "adm-done" not in by_type
    assert viewer.get(changelist, {"queue": "celery"}).status_code == 200


def test_timeline_shows_decoded_payloads_durations_and_failures(viewer, world):
    caught = world["caught"]
    response = viewer.get(url(WorkflowRun, "timeline", caught.run_id()))
    html = response.content.decode()
    assert response.status_code == 200
    for event_type in ("WorkflowStarted", "ActivityScheduled", "ActivityFailed", "FailureHandled"):
        assert event_type in html
    assert "attempt 1 declined" in html  # the failure message
    assert "Traceback" in html  # the failure row's traceback
    assert "PaymentDeclined" in html
    assert "&quot;caught&quot;" in html  # decoded output, not an Avro blob
    assert re.search(r"\d+\.\d{3} s", html)  # durations between events
    done = viewer.get(url(WorkflowRun, "timeline", world["done"].run_id())).content.decode()
    assert "hello ada" in done  # ActivityCompleted result, decoded from Avro


def test_timeline_links_parent_child_and_continue_as_new(viewer, world):
    parent = WorkflowRun.objects.get(instance_id="adm-parent")
    call = ChildCall.objects.get(parent_run=parent)
    html = viewer.get(url(WorkflowRun, "timeline", parent.pk)).content.decode()
    assert url(WorkflowRun, "timeline", call.child_run_id) in html
    child = viewer.get(url(WorkflowRun, "timeline", call.child_run_id)).content.decode()
    assert "Parent run" in child and url(WorkflowRun, "timeline", parent.pk) in child
    first, second = WorkflowRun.objects.filter(instance_id="adm-looper").order_by("run_number")
    html = viewer.get(url(WorkflowRun, "timeline", first.pk)).content.decode()
    assert "Continued as" in html and url(WorkflowRun, "timeline", second.pk) in html
    html = viewer.get(url(WorkflowRun, "timeline", second.pk)).content.decode()
    assert "Continued from" in html and url(WorkflowRun, "timeline", first.pk) in html
    detail = viewer.get(url(WorkflowRun, "change", second.pk)).content.decode()
    assert "continued from" in detail


def test_timeline_pages_and_event_type_filter(viewer, world):
    run = WorkflowRun.objects.get(instance_id="adm-done")
    timeline = url(WorkflowRun, "timeline", run.pk)
    total = run.history_event_count
    first = viewer.get(timeline, {"size": 3}).content.decode()
    assert 'id="event-1"' in first and 'id="event-4"' not in first
    assert f"events 1\u20133 of {total}" in first
    second = viewer.get(timeline, {"size": 3, "after": 3}).content.decode()
    assert 'id="event-4"' in second and 'id="event-3"' not in second
    last = viewer.get(timeline, {"size": 3, "before": total + 1}).content.decode()
    assert f'id="event-{total}"' in last and "next" not in last.split("dw-pager")[1][:400]
    only = viewer.get(timeline, {"event_type": "ActivityCompleted"}).content.decode()
    assert only.count('<tr class="dw-kind-') == 2
    assert viewer.get(url(WorkflowRun, "timeline", uuid.uuid4())).status_code == 404
    assert viewer.get(url(WorkflowRun, "timeline", "not-a-uuid")).status_code == 404


def _grow_history(run: WorkflowRun, count: int) -> None:
    start_at = run.next_sequence
    now = clock.now()
    HistoryEvent.objects.bulk_create(
        [
            HistoryEvent(
                run=run,
                sequence=start_at + index,
                event_type="SideEffectRecorded",
                payload={"sequence": index, "result": {"codec": "json", "blob": str(index)}},
                recorded_at=now + dt.timedelta(milliseconds=index),
            )
            for index in range(count)
        ],
        batch_size=2000,
    )
    WorkflowRun.objects.filter(pk=run.pk).update(next_sequence=start_at + count)


def _queries(client, path: str, params: dict | None = None) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path, params or {}).status_code == 200
    return len(captured)


def test_page_cost_does_not_grow_with_history(viewer, world, django_assert_max_num_queries):
    # Two open runs: an open run's page also reads what it waits on and why it may need
    # attention (a fixed number of queries), which a closed run's page skips.
    small = WorkflowRun.objects.get(instance_id="adm-waiting")
    big = WorkflowRun.objects.get(instance_id="adm-sleeper")
    _grow_history(big, 20_000)
    small_cost = _queries(viewer, url(WorkflowRun, "timeline", small.pk))
    big_cost = _queries(viewer, url(WorkflowRun, "timeline", big.pk))
    middle_cost = _queries(viewer, url(WorkflowRun, "timeline", big.pk), {"after": 10_000})
    assert small_cost == big_cost == middle_cost
    with django_assert_max_num_queries(big_cost):
        viewer.get(url(WorkflowRun, "timeline", big.pk), {"before": 15_000})
    assert big_cost <= 30
    list_cost = _queries(viewer, url(HistoryEvent))
    with django_assert_max_num_queries(list_cost):
        viewer.get(url(HistoryEvent), {"p": 3})
    with django_assert_max_num_queries(list_cost):
        viewer.get(url(HistoryEvent), {"event_type": "SideEffectRecorded"})
    # The triage columns (attention badges, "waiting on") read each page in a fixed number
    # of queries: the same for a page of one run as for a page of every run.
    run_list = _queries(viewer, url(WorkflowRun))
    assert run_list <= 20
    assert _queries(viewer, url(WorkflowRun), {"q": "adm-done"}) <= run_list
    detail = _queries(viewer, url(HistoryEvent, "change", HistoryEvent.objects.last().pk))
    assert detail <= 12


def test_list_counts_are_capped(viewer, world):
    big = WorkflowRun.objects.get(instance_id="adm-sleeper")
    _grow_history(big, 10_050)
    html = viewer.get(url(HistoryEvent)).content.decode()
    assert "10001" in html.replace(",", "").replace("\u00a0", "")


def test_typed_search_attribute_rows(viewer, world):
    from durable_workflow.models import SearchAttribute

    run = WorkflowRun.objects.get(instance_id="adm-sleeper")
    SearchAttribute.objects.create(run=run, key="region", value_string="eu-west")
    changelist = url(WorkflowRun)
    html = viewer.get(changelist, {"q": "region=eu-west"}).content.decode()
    assert ">adm-sleeper<" in html and ">adm-done<" not in html
    assert ">adm-sleeper<" not in viewer.get(changelist, {"q": "region=us"}).content.decode()
    rows = reverse("admin:durable_workflow_searchattribute_changelist")
    login = User.objects.create_user("attrs", password="x", is_staff=True)
    login.user_permissions.add(Permission.objects.get(codename="view_searchattribute"))
    viewer.force_login(login)
    listing = viewer.get(rows, {"q": "eu-west"})
    assert listing.status_code == 200 and b"eu-west" in listing.content
    pk = SearchAttribute.objects.get(key="region").pk
    detail = reverse("admin:durable_workflow_searchattribute_change", args=[pk])
    assert viewer.get(detail).status_code == 200


def test_detail_pages_show_payloads_decoded_not_as_blobs(viewer, world):
    execution = ActivityExecution.objects.filter(activity_type="tests.greet").first()
    html = viewer.get(url(ActivityExecution, "change", execution.pk)).content.decode()
    assert "hello ada" in html and "&quot;blob&quot;" not in html
    run = WorkflowRun.objects.get(instance_id="adm-done")
    html = viewer.get(url(WorkflowRun, "change", run.pk)).content.decode()
    assert "hello ada" in html and "&quot;blob&quot;" not in html
    signal = WorkflowSignal.objects.first()
    html = viewer.get(url(WorkflowSignal, "change", signal.pk)).content.decode()
    assert "early" in html and "&quot;blob&quot;" not in html
