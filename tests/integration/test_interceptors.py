"""Interceptors and headers through the real engine paths (SQLite and PostgreSQL).

The chain's order and composition for every kind of interceptor, the tenant-context
example end to end (client header -> workflow -> child -> activity), headers stored
in history and seen the same on replay, and hostile headers refused before anything
is written.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

import durable_workflow as dw
from durable_workflow import StartOptions, WorkflowStub
from durable_workflow.exceptions import ConfigurationError, InvalidHeaderError
from durable_workflow.models import WorkflowCommand, WorkflowInstance, WorkflowRun
from durable_workflow.testing import Replayer, export_history
from tests.integration.helpers import events_of
from tests.testapp import tenancy

pytestmark = pytest.mark.django_db(transaction=True)


def interceptors(*entries: Any) -> Any:
    return override_settings(
        DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "INTERCEPTORS": list(entries)}
    )


@pytest.fixture(autouse=True)
def _calls():
    tenancy.CALLS.clear()
    yield
    tenancy.CALLS.clear()


def client_calls() -> list[tuple[str, str]]:
    client = {f"{verb}_workflow" for verb in ("start", "signal", "update", "query", "cancel")}
    return [(who, method) for who, method, _ in tenancy.CALLS if method in client]


def test_the_chain_runs_outermost_first_for_every_kind(inline):
    with interceptors("tests.testapp.tenancy.Outer", tenancy.Inner):
        stub = WorkflowStub.make(tenancy.TenantOrder, "chain-1").with_headers({"req": "r-1"})
        stub.start(True)
        inline.run()
        stub.signal("poke", "go")
        inline.run()
        assert stub.refresh().completed()

    calls = tenancy.CALLS
    # Client: outer sees the call first, and the result last.
    assert calls[:4] == [
        ("outer", "start_workflow", None),
        ("inner", "start_workflow", None),
        ("inner", "start_workflow:done", True),
        ("outer", "start_workflow:done", True),
    ]
    assert ("outer", "signal_workflow", "poke") in calls
    # Inside the workflow and the activity: the same order, outer first.
    for method in ("handle_workflow", "schedule_activity", "start_child", "start_timer"):
        order = [who for who, m, _ in calls if m == method]
        assert order[:2] == ["outer", "inner"], method
    executed = [(who, detail) for who, m, detail in calls if m == "execute_activity"]
    assert [who for who, _ in executed][:2] == ["outer", "inner"]

    # Each interceptor added itself to ``seen-by``: the stored headers show the order.
    [started] = events_of(stub, "WorkflowStarted")
    assert started["headers"] == {"req": "r-1", "seen-by": "outer,inner"}
    [signal] = events_of(stub, "SignalReceived")
    assert signal["headers"] == {"req": "r-1", "seen-by": "outer,inner"}
    scheduled = events_of(stub, "ActivityScheduled")
    assert [e["headers"] for e in scheduled] == [{"seen-by": "outer,inner"}]
    [child] = events_of(stub, "ChildWorkflowScheduled")
    assert child["headers"] == {"seen-by": "outer,inner"}
    # The activity attempt saw what the workflow sent; the child started with its headers.
    assert executed[0][1] == {"seen-by": "outer,inner"}
    output = stub.output()
    assert output["activity"]["headers"] == {"seen-by": "outer,inner"}
    assert output["child"]["child_headers"] == {"seen-by": "outer,inner"}
    assert output["headers"] == {"req": "r-1", "seen-by": "outer,inner"}
    # The start command row keeps them too.
    command = WorkflowCommand.objects.get(instance_id="chain-1", command_type="start")
    assert command.payload["headers"] == {"req": "r-1", "seen-by": "outer,inner"}


def test_updates_queries_and_cancel_go_through_the_chain(inline):
    with interceptors(tenancy.Outer, tenancy.Inner, tenancy.WrapsResults):
        stub = WorkflowStub.make(tenancy.TenantOrder, "chain-2").with_headers({"req": "r-2"})
        stub.start(False)
        inline.run()
        tenancy.CALLS.clear()
        submitted = stub.attempt_update("rename", "x", wait_timeout=0)
        inline.run()
        assert stub.inspect_update(submitted.update_id).result == "X"
        assert stub.query("seen") == {"wrapped": ["update:x"]}
        stub.cancel("enough")
        inline.run()

    assert client_calls() == [
        ("outer", "update_workflow"),
        ("inner", "update_workflow"),
        ("outer", "query_workflow"),
        ("inner", "query_workflow"),
        ("outer", "cancel_workflow"),
        ("inner", "cancel_workflow"),
    ]
    expected = {"req": "r-2", "seen-by": "outer,inner"}
    handled = [(m, d) for who, m, d in tenancy.CALLS if who == "outer" and m.startswith("handle_")]
    assert ("handle_update", ("rename", expected)) in handled
    assert ("handle_query", ("seen", expected)) in handled
    [accepted] = events_of(stub, "UpdateAccepted")
    assert accepted["headers"] == expected
    [cancel] = events_of(stub, "CancelRequested")
    assert cancel["headers"] == expected
    assert stub.refresh().cancelled()


def test_terminate_carries_headers(inline):
    with interceptors(tenancy.Outer):
        stub = WorkflowStub.make(tenancy.TenantOrder, "chain-3").with_headers({"req": "r-3"})
        stub.start(False)
        inline.run()
        stub.terminate("stop")
    [requested] = events_of(stub, "TerminateRequested")
    assert requested["headers"] == {"req": "r-3", "seen-by": "outer"}
    assert ("outer", "terminate_workflow", "stop") in tenancy.CALLS


def test_with_start_commands_and_archive_go_through_the_chain(inline):
    with interceptors(tenancy.Outer, tenancy.Inner):
        stub = WorkflowStub.make(tenancy.TenantOrder, "chain-ws").with_headers({"req": "r-4"})
        sent = stub.signal_with_start("poke", "go", start_args=[False])
        assert sent.signal.accepted
        inline.run()
        assert stub.refresh().completed()
        assert stub.archive("done").accepted
        other = WorkflowStub.make(tenancy.TenantOrder, "chain-wu").with_headers({"req": "r-5"})
        submitted = other.submit_update_with_start("rename", "x", start_args=[False])
        assert submitted.update is not None and submitted.update.accepted

    mine = {"signal_with_start_workflow", "update_with_start_workflow", "archive_workflow"}
    assert [(who, m, d) for who, m, d in tenancy.CALLS if m in mine] == [
        ("outer", "signal_with_start_workflow", "poke"),
        ("inner", "signal_with_start_workflow", "poke"),
        ("outer", "archive_workflow", "done"),
        ("inner", "archive_workflow", "done"),
        ("outer", "update_with_start_workflow", "rename"),
        ("inner", "update_with_start_workflow", "rename"),
    ]
    # The interceptors' headers travel with both the start and the message.
    [started] = events_of(stub, "WorkflowStarted")
    assert started["headers"] == {"req": "r-4", "seen-by": "outer,inner"}
    [signal] = events_of(stub, "SignalReceived")
    assert signal["headers"] == {"req": "r-4", "seen-by": "outer,inner"}
    [started] = events_of(other, "WorkflowStarted")
    assert started["headers"] == {"req": "r-5", "seen-by": "outer,inner"}
    [accepted] = events_of(other, "UpdateAccepted")
    assert accepted["headers"] == {"req": "r-5", "seen-by": "outer,inner"}


class SeesStarts(dw.ClientInterceptor):
    seen: list[tuple[str, Any]] = []

    def start_workflow(self, input: Any, next: Any) -> Any:
        self.seen.append((input.source, input.schedule))
        input.headers["fired-by"] = input.source
        return next(input)


def test_a_schedule_fire_goes_through_start_workflow_with_its_source(inline):
    from durable_workflow.schedules import ScheduleManager

    SeesStarts.seen.clear()
    with interceptors(SeesStarts):
        ScheduleManager.create(
            schedule_id="chained-hourly",
            workflow="tests.tenancy.order",
            cron_expression="0 * * * *",
            arguments=[False],
        )
        instance_id = ScheduleManager.trigger("chained-hourly")
        WorkflowStub.make(tenancy.TenantOrder, "chain-client").start(False)
    [(source, lineage), (client, none)] = SeesStarts.seen
    assert (source, client, none) == ("schedule", "client", None)
    assert lineage["schedule_id"] == "chained-hourly" and lineage["trigger_number"] == 1
    stub = WorkflowStub.load(instance_id)
    [started] = events_of(stub, "WorkflowStarted")
    assert started["headers"] == {"fired-by": "schedule"}


def test_tenant_context_reaches_activities_and_children(inline):
    with interceptors(tenancy.TenantInterceptor):
        token = tenancy.current_tenant.set("acme")
        try:
            stub = WorkflowStub.make(tenancy.TenantOrder, "tenant-1")
            stub.start()
            inline.run()
            stub.signal("poke", "go")
            inline.run()
        finally:
            tenancy.current_tenant.reset(token)
        output = stub.result(timeout=5)

    assert output["headers"] == {"tenant": "acme"}
    assert output["activity"] == {"label": "a", "tenant": "acme", "headers": {"tenant": "acme"}}
    assert output["child"] == {
        "child_headers": {"tenant": "acme"},
        "activity": {"label": "c", "tenant": "acme", "headers": {"tenant": "acme"}},
    }
    # Outside the attempt the context is unset again.
    assert tenancy.current_tenant.get() is None


def parent_inbound() -> list[tuple[str, Any]]:
    """The parent run's inbound calls (its headers hold ``x``; its child's do not)."""
    ours = {"handle_workflow": lambda d: "x" in d, "handle_signal": lambda d: "x" in d[1]}
    return [(m, d) for _, m, d in tenancy.CALLS if m in ours and ours[m](d)]


def test_local_activities_are_intercepted_on_both_sides(inline):
    with interceptors(tenancy.TenantInterceptor, tenancy.Outer):
        token = tenancy.current_tenant.set("hooli")
        try:
            stub = WorkflowStub.make(tenancy.TenantLocal, "tenant-local")
            stub.start()
        finally:
            tenancy.current_tenant.reset(token)
        inline.run()
        output = stub.result(timeout=5)
    expected = {"tenant": "hooli", "seen-by": "outer"}
    assert output == {"label": "l", "tenant": "hooli", "headers": expected}
    [scheduled] = events_of(stub, "ActivityScheduled")
    assert scheduled["local_activity"] is True
    assert scheduled["headers"] == expected


def test_an_async_activity_runs_inside_the_tenant_scope(inline):
    with interceptors(tenancy.TenantInterceptor):
        token = tenancy.current_tenant.set("umbrella")
        try:
            stub = WorkflowStub.make(tenancy.TenantAsync, "tenant-async")
            stub.start()
        finally:
            tenancy.current_tenant.reset(token)
        inline.run()
        assert stub.result(timeout=5) == {"label": "async", "tenant": "umbrella"}


def test_a_signal_from_a_workflow_carries_its_headers(inline):
    target = WorkflowStub.make(tenancy.TenantOrder, "signal-target")
    target.start(False)
    inline.run()
    with interceptors(tenancy.TenantInterceptor, tenancy.Outer):
        sender = WorkflowStub.make(tenancy.Poker, "signal-sender")
        sender.start(StartOptions(headers={"tenant": "stark"}), "signal-target")
        inline.run()
        assert sender.result(timeout=5) == "sent"
        assert target.result(timeout=5)["headers"] == {}
    expected = {"tenant": "stark", "seen-by": "outer"}
    [sent] = events_of(sender, "ExternalSignalSent")
    assert sent["headers"] == expected
    [received] = events_of(target, "SignalReceived")
    assert received["headers"] == expected
    assert ("outer", "handle_signal", ("poke", expected)) in tenancy.CALLS
    assert ("outer", "signal_external", "poke") in [(w, m, d) for w, m, d in tenancy.CALLS]


def test_headers_are_the_same_on_replay_with_or_without_interceptors(inline, tmp_path):
    with interceptors(tenancy.TenantInterceptor, tenancy.Outer):
        token = tenancy.current_tenant.set("globex")
        try:
            stub = WorkflowStub.make(tenancy.TenantOrder, "replay-1").with_headers({"x": "1"})
            stub.start()
            inline.run()
            stub.signal("poke", "go")
            inline.run()
        finally:
            tenancy.current_tenant.reset(token)
        assert stub.refresh().completed()
        first = parent_inbound()

        # Replayed from the stored history (what a cold worker does): the inbound
        # interceptors see the recorded headers again, and nothing diverges.
        path = tmp_path / "history.json"
        path.write_text(json.dumps(export_history(stub.run_id()), default=str))
        tenancy.CALLS.clear()
        assert Replayer().replay(path).closed_by == "WorkflowCompleted"
        again = parent_inbound()
    expected = {"tenant": "globex", "x": "1", "seen-by": "outer"}
    assert first[0] == ("handle_workflow", expected)
    assert again == first
    # Headers are history, not configuration: the run replays without the interceptors.
    assert Replayer().replay_run(stub.run_id()).closed_by == "WorkflowCompleted"


def test_continue_as_new_keeps_the_start_headers(inline):
    stub = WorkflowStub.make("tests.looper", "can-headers")
    stub.start(StartOptions(headers={"tenant": "initech"}), 2)
    inline.run()
    for _ in range(2):
        stub.signal("tick")
        inline.run()
    assert stub.refresh().completed()
    runs = WorkflowRun.objects.filter(instance_id="can-headers").order_by("run_number")
    assert runs.count() > 1
    for run in runs:
        history = WorkflowStub.load_run(run.id).history()
        [started] = [e for e in history if e.event_type == "WorkflowStarted"]
        assert started.payload["headers"] == {"tenant": "initech"}


def test_runs_without_headers_record_none():
    with interceptors():
        stub = WorkflowStub.make("tests.sequential", "no-headers")
        stub.start("Ada")
    [started] = events_of(stub, "WorkflowStarted")
    assert "headers" not in started


HOSTILE = [
    ({"tenant\x00": "x"}, "NUL"),
    ({"tenant": "a\x00b"}, "NUL"),
    ({"tenant": "\ud800"}, "surrogate"),
    ({"": "x"}, "empty"),
    ({"tenant": 7}, "string"),
    ({3: "x"}, "string"),
    ({"bell\x07": "x"}, "control"),
    ({"k": "v" * 5000}, "at most 4096"),
    ({f"k{i}": "v" for i in range(65)}, "at most 64"),
    ({f"k{i}": "v" * 4000 for i in range(5)}, "bytes in all"),
    (["tenant"], "must map"),
]


@pytest.mark.parametrize(("headers", "why"), HOSTILE)
def test_hostile_headers_are_refused_before_anything_is_written(headers, why):
    stub = WorkflowStub.make("tests.sequential", "hostile-1")
    with pytest.raises(InvalidHeaderError, match=why) as refused:
        stub.with_headers(headers)
    assert isinstance(refused.value, dw.InvalidValueError)
    with pytest.raises(InvalidHeaderError, match=why):
        StartOptions(headers=headers)
    assert not WorkflowRun.objects.filter(instance_id="hostile-1").exists()


class AddsHostile(dw.ClientInterceptor):
    def start_workflow(self, input: Any, next: Any) -> Any:
        input.headers["bad"] = "\x00"
        return next(input)

    def signal_workflow(self, input: Any, next: Any) -> Any:
        input.headers["bad"] = "\ud800"
        return next(input)


def test_an_interceptors_hostile_headers_are_refused_too(inline):
    with interceptors(AddsHostile):
        stub = WorkflowStub.make("tests.sequential", "hostile-2")
        with pytest.raises(InvalidHeaderError, match="NUL"):
            stub.start("Ada")
        assert not WorkflowRun.objects.filter(instance_id="hostile-2").exists()
    stub.start("Ada")
    with interceptors(AddsHostile), pytest.raises(InvalidHeaderError, match="surrogate"):
        stub.signal("anything")
    assert not WorkflowCommand.objects.filter(instance_id="hostile-2", command_type="signal")


def test_bad_interceptor_settings_are_configuration_errors():
    with (
        pytest.raises(ConfigurationError, match="cannot import"),
        interceptors("tests.testapp.tenancy.NoSuchThing"),
    ):
        pass
    with pytest.raises(ConfigurationError, match="is not an interceptor"), interceptors(object):
        pass
    assert WorkflowInstance.objects.count() == 0
