"""Versioning across a code change, memo and search attributes with the run query API."""

from __future__ import annotations

import pytest

from durable_workflow import StartOptions, VersionNotSupported, WorkflowStub
from durable_workflow.engine.failures import BodyFailed
from durable_workflow.models import SearchAttribute, WorkflowRun
from durable_workflow.visibility import list_runs
from tests.integration.helpers import event_types, events_of, start
from tests.testapp import versioned
from tests.testapp.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_started_on_v1_stays_on_the_old_path_while_new_runs_take_the_new_one(
    inline, monkeypatch
):
    monkeypatch.setitem(versioned.VERSIONED_CODE, "version", "v1")
    old = start("tests.versioned", "ver-old")
    inline.run()
    assert old.refresh().status() == "waiting"  # v1 ran Greet and now waits for "go"

    monkeypatch.setitem(versioned.VERSIONED_CODE, "version", "v2")  # deploy v2
    new = start("tests.versioned", "ver-new")
    inline.run()
    old.signal("go")
    new.signal("go")
    inline.run()
    assert old.refresh().output() == "hello old path"
    assert new.refresh().output() == 42
    assert "VersionMarkerRecorded" not in event_types(old)  # old runs write no marker
    marker = events_of(new, "VersionMarkerRecorded")[0]
    assert marker["change_id"] == "greeting-change"
    assert (marker["version"], marker["min_supported"], marker["max_supported"]) == (-1 + 2, -1, 1)
    assert Invocation.objects.filter(name="greet").count() == 1
    assert Invocation.objects.filter(name="add").count() == 1
    # both runs replay clean against v2: the old one without a marker, the new one with it
    from durable_workflow.testing import Replayer

    assert Replayer().replay_run(old.run_id()).closed_by == "WorkflowCompleted"
    assert Replayer().replay_run(new.run_id()).closed_by == "WorkflowCompleted"


def test_switching_patched_to_get_version_is_non_deterministic(inline, monkeypatch):
    from durable_workflow import NonDeterminismError
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.store import history
    from tests.testapp.versioned import Patched

    stub = start("tests.patched", "patch-4", "patched")
    inline.run()

    def handle(self, mode):
        import durable_workflow as dw

        return dw.get_version("new-thing", -1, 1)

    monkeypatch.setattr(Patched, "handle", handle)
    runtime = WorkflowRuntime(
        factory=lambda: Patched._dw_instantiate(runtime),
        workflow_id="patch-4",
        run_id=stub.run_id(),
    )
    runtime.enter_query_mode()
    with pytest.raises(NonDeterminismError, match="cannot share a change id"):
        runtime.feed(history.load_history(stub.run_id()))


def test_patched_and_deprecate_patch(inline):
    stub = start("tests.patched", "patch-1", "patched")
    inline.run()
    assert stub.refresh().output() is True
    marker = events_of(stub, "VersionMarkerRecorded")[0]
    assert marker["marker_kind"] == "patch"
    deprecated = start("tests.patched", "patch-2", "deprecated")
    inline.run()
    assert deprecated.refresh().output() == "new path"


def test_recorded_version_outside_the_supported_range(inline, monkeypatch):
    stub = start("tests.patched", "patch-3", "version-range")
    inline.run()
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.store import history
    from tests.testapp.versioned import Patched

    def handle(self, mode):
        import durable_workflow as dw

        return dw.get_version("ranged", 4, 5)  # the recorded 3 is no longer supported

    monkeypatch.setattr(Patched, "handle", handle)
    runtime = WorkflowRuntime(
        factory=lambda: Patched._dw_instantiate(runtime),
        workflow_id="patch-3",
        run_id=stub.run_id(),
    )
    runtime.enter_query_mode()
    # Code that no longer supports the run's version is a bug to fix: the workflow task
    # fails (the run would be parked), the run does not.
    with pytest.raises(BodyFailed) as raised:
        runtime.feed(history.load_history(stub.run_id()))
    assert stub.refresh().output() == 3
    assert runtime.closed is None
    assert isinstance(raised.value.error, VersionNotSupported)


def test_memo_and_search_attributes(inline):
    stub = WorkflowStub.make("tests.tagged", "tag-1")
    stub.start(
        "acme",
        3,
        options=StartOptions(
            business_key="order-1", memo={"source": "api"}, search_attributes={"env": "prod"}
        ),
    )
    inline.run()
    stub.refresh()
    run = WorkflowRun.objects.get(id=stub.run_id())
    assert run.memo == {"lines": [{"qty": 2, "sku": "A"}], "source": "api", "status": "done"}
    assert run.search_attributes == {
        "customer": "acme",
        "env": "prod",
        "priority": 3,
        "stage": "done",
    }
    types = event_types(stub)
    assert types.count("MemoUpserted") == 2 and types.count("SearchAttributesUpserted") == 2
    assert events_of(stub, "MemoUpserted")[1]["merged"] == run.memo
    rows = dict(SearchAttribute.objects.filter(run_id=run.id).values_list("key", "value_number"))
    assert rows["priority"] == 3.0 and "vip" not in rows


def test_list_runs_filters(inline):
    for index, (customer, priority) in enumerate([("acme", 1), ("acme", 5), ("globex", 5)]):
        stub = WorkflowStub.make("tests.tagged", f"tag-list-{index}")
        stub.start(customer, priority, options=StartOptions(business_key=f"bk-{index}"))
    start("tests.sequential", "not-tagged", "ada")
    inline.run()
    by_customer = list_runs(search_attributes={"customer": "acme"})
    assert sorted(r.instance_id for r in by_customer) == ["tag-list-0", "tag-list-1"]
    urgent = list_runs(search_attributes={"customer": "acme", "priority__gte": 3})
    assert [r.instance_id for r in urgent] == ["tag-list-1"]
    assert {r.instance_id for r in list_runs(search_attributes={"priority__in": [1, 5]})} == {
        "tag-list-0",
        "tag-list-1",
        "tag-list-2",
    }
    assert [r.instance_id for r in list_runs(business_key="bk-2")] == ["tag-list-2"]
    assert len(list_runs(workflow_type="tests.tagged", status="completed")) == 3
    assert [r.instance_id for r in list_runs(workflow_type="tests.sequential")] == ["not-tagged"]
    assert len(list_runs(workflow_type="tests.tagged", limit=2)) == 2


@pytest.mark.parametrize(
    "bad",
    [{"": 1}, {"has space": 1}, {"k": [1]}, {"k": "x" * 192}, {"k": float("inf")}],
)
def test_bad_search_attributes_are_rejected(bad):
    from durable_workflow.authoring.visibility import InvalidVisibilityError

    with pytest.raises(InvalidVisibilityError):
        StartOptions(search_attributes=bad)


def test_memo_size_limit_fails_the_run(inline):
    from django.test import override_settings

    with override_settings(DURABLE_WORKFLOW={"STRUCTURAL_LIMITS": {"memo_size_bytes": 10}}):
        stub = start("tests.tagged", "tag-big", "acme", 1)
        inline.run()
    stub.refresh()
    assert stub.failed()
    final = stub.history()[-1].payload
    assert final["structural_limit_kind"] == "memo_size_bytes"
    assert "MemoUpserted" not in event_types(stub)
