"""OpenTelemetry tracing through the engine in this process (SQLite and PostgreSQL).

The span tree of a workflow with activities, a retry, a timer, a child and a signal:
one trace from the caller's span, each workflow task under the start, each activity
attempt under the span that scheduled it, the child's tasks under the span that
started it; and nothing traced twice when every task replays the history cold.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durable_workflow import WorkflowStub
from durable_workflow.contrib.opentelemetry import TracingInterceptor
from durable_workflow.schedules import ScheduleManager
from durable_workflow.testing import Replayer, travel
from tests.docs.blocks import DOCS
from tests.otel_spans import render_tree, span_record
from tests.testapp import tenancy, traced

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tracing():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configured = {"INTERCEPTORS": [TracingInterceptor(tracer_provider=provider)]}
    with override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, **configured}):
        yield provider, exporter
    provider.shutdown()


def run_order(inline: Any, provider: TracerProvider, instance_id: str) -> WorkflowStub:
    with provider.get_tracer("tests").start_as_current_span("POST /orders"):
        stub = WorkflowStub.make(traced.Order, instance_id)
        stub.start(1)
    inline.run()
    with travel(seconds=2):
        inline.run()
        stub.signal("proceed")
        inline.run()
    assert stub.refresh().completed(), stub.status()
    return stub


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def test_one_trace_with_every_span_under_the_one_that_caused_it(inline, tracing):
    provider, exporter = tracing
    stub = run_order(inline, provider, "traced-1")
    spans = [span_record(s) for s in exporter.get_finished_spans()]

    # The signal was sent outside the request: its own trace, linked from where it landed.
    [signal] = named(spans, "SignalWorkflow:proceed")
    assert len({s["trace_id"] for s in spans if s is not signal}) == 1
    by_id = {s["span_id"]: s for s in spans}

    def parent(span: dict[str, Any]) -> str:
        return by_id[span["parent_id"]]["name"]

    [request] = named(spans, "POST /orders")
    [start] = named(spans, "StartWorkflow:tests.traced.order")
    assert start["parent_id"] == request["span_id"] and start["kind"] == "CLIENT"
    assert start["attributes"]["durable_workflow.workflow.run_id"] == stub.run_id()
    tasks = named(spans, "WorkflowTask:tests.traced.order")
    assert len(tasks) >= 4 and all(t["parent_id"] == start["span_id"] for t in tasks)
    assert tasks[0]["attributes"]["durable_workflow.workflow_task.replay"] is False

    a, b = [
        s
        for s in named(spans, "StartActivity:tests.traced.step")
        if s["attributes"]["durable_workflow.workflow.type"] == "tests.traced.order"
    ]
    assert {parent(a), parent(b)} == {"WorkflowTask:tests.traced.order"}
    runs = named(spans, "RunActivity:tests.traced.step")
    under_a = [r for r in runs if r["parent_id"] == a["span_id"]]
    assert [r["attributes"]["durable_workflow.activity.attempt"] for r in under_a] == [1, 2]
    assert [r["status"] for r in under_a] == ["ERROR", "UNSET"]
    assert under_a[0]["attributes"]["error.type"] == "RuntimeError"
    assert under_a[1]["attributes"]["durable_workflow.activity.retry"] is True
    assert [r["parent_id"] for r in runs if r not in under_a].count(b["span_id"]) == 1

    [timer] = named(spans, "FireTimer")
    assert timer["attributes"]["durable_workflow.timer.seconds"] == 1
    [child_start] = named(spans, "StartChildWorkflow:tests.traced.child")
    child_tasks = named(spans, "WorkflowTask:tests.traced.child")
    assert child_tasks and all(t["parent_id"] == child_start["span_id"] for t in child_tasks)
    [child_activity] = [
        r for r in runs if r["attributes"]["durable_workflow.workflow.type"] == "tests.traced.child"
    ]
    assert parent(by_id[child_activity["parent_id"]]) == "WorkflowTask:tests.traced.child"

    [handled] = named(spans, "HandleSignal:proceed")
    assert handled["links"] == [signal["span_id"]]
    assert len(named(spans, "CompleteWorkflow")) == 2  # the order and its child
    # What the traced worker recorded replays without the interceptor.
    assert Replayer().replay_run(stub.run_id()).closed_by == "WorkflowCompleted"


def test_cold_replays_emit_nothing_twice(inline, tracing):
    provider, exporter = tracing
    with override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "STICKY_ENABLED": False}):
        run_order(inline, provider, "traced-cold")
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    counts = Counter(s["name"] for s in spans if not s["name"].startswith("WorkflowTask:"))
    assert counts == {
        "POST /orders": 1,
        "StartWorkflow:tests.traced.order": 1,
        "StartActivity:tests.traced.step": 3,
        "RunActivity:tests.traced.step": 4,
        "StartTimer": 1,
        "FireTimer": 1,
        "StartChildWorkflow:tests.traced.child": 1,
        "SignalWorkflow:proceed": 1,
        "HandleSignal:proceed": 1,
        "CompleteWorkflow": 2,
    }
    tasks = named(spans, "WorkflowTask:tests.traced.order")
    later = [t["attributes"] for t in tasks[1:]]
    assert all(a["durable_workflow.workflow_task.sticky"] == "cold" for a in later)
    assert all(a["durable_workflow.workflow_task.replay"] for a in later)


def test_the_tree_docs_show_is_the_one_rendered(inline, tracing):
    provider, exporter = tracing
    run_order(inline, provider, "traced-tree")
    tree = render_tree(
        [span_record(s) for s in exporter.get_finished_spans()],
        keys=("durable_workflow.activity.attempt", "durable_workflow.workflow_task.sticky"),
    )
    page = (DOCS / "how-to" / "tracing.md").read_text()
    shown = page.split("```text\n", 1)[1].split("```", 1)[0]
    assert tree + "\n" == shown


def test_an_async_activity_runs_inside_its_attempt_span(inline, tracing):
    _, exporter = tracing
    stub = WorkflowStub.make(traced.AsyncTraced, "traced-async")
    stub.start()
    inline.run()
    current = stub.result(timeout=5)
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [attempt] = named(spans, "RunActivity:tests.traced.current-span")
    assert current == attempt["span_id"]
    [scheduled] = named(spans, "StartActivity:tests.traced.current-span")
    assert attempt["parent_id"] == scheduled["span_id"]


def test_a_signal_from_a_workflow_links_sender_and_receiver(inline, tracing):
    _, exporter = tracing
    target = WorkflowStub.make(tenancy.TenantOrder, "traced-target")
    target.start(False)
    inline.run()
    sender = WorkflowStub.make(tenancy.Poker, "traced-sender")
    sender.start("traced-target")
    inline.run()
    assert target.result(timeout=5)["activity"]["label"] == "a"
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [sent] = named(spans, "SignalExternalWorkflow:poke")
    assert sent["attributes"]["durable_workflow.target.instance_id"] == "traced-target"
    [handled] = named(spans, "HandleSignal:poke")
    assert handled["links"] == [sent["span_id"]]
    assert handled["attributes"]["durable_workflow.workflow.instance_id"] == "traced-target"


def test_continue_as_new_stays_in_the_trace(inline, tracing):
    _, exporter = tracing
    stub = WorkflowStub.make(traced.Again, "traced-again")
    stub.start(1)
    inline.run()
    assert stub.result(timeout=5) == "done"
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [start] = named(spans, "StartWorkflow:tests.traced.again")
    tasks = named(spans, "WorkflowTask:tests.traced.again")
    assert len({t["attributes"]["durable_workflow.workflow.run_id"] for t in tasks}) == 2
    assert all(t["parent_id"] == start["span_id"] for t in tasks)
    assert [s["name"] for s in spans if not s["name"].startswith(("Start", "Workflow"))] == [
        "ContinueAsNew",
        "CompleteWorkflow",
    ]


def test_updates_queries_cancel_and_terminate_have_client_spans(inline, tracing):
    _, exporter = tracing
    stub = WorkflowStub.make(tenancy.TenantOrder, "traced-commands")
    stub.start(False)
    inline.run()
    submitted = stub.attempt_update("rename", "x", wait_timeout=0)
    inline.run()
    assert stub.inspect_update(submitted.update_id).result == "X"
    assert stub.query("seen") == ["update:x"]
    stub.cancel("enough")
    inline.run()
    other = WorkflowStub.make(tenancy.TenantOrder, "traced-terminated")
    other.start(False)
    other.terminate("stop")
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [update] = named(spans, "UpdateWorkflow:rename")
    [handled] = named(spans, "HandleUpdate:rename")
    assert handled["links"] == [update["span_id"]]
    [query] = named(spans, "QueryWorkflow:seen")
    assert query["attributes"]["durable_workflow.message.name"] == "seen"
    assert not [s for s in spans if s["name"].startswith("HandleQuery")]
    for name in ("CancelWorkflow", "TerminateWorkflow"):
        [closing] = named(spans, f"{name}:tests.tenancy.order")
        assert closing["kind"] == "CLIENT"


def test_with_start_commands_and_archive_have_client_spans(inline, tracing):
    _, exporter = tracing
    stub = WorkflowStub.make(tenancy.TenantOrder, "traced-sws")
    sent = stub.signal_with_start("poke", "go", start_args=[False])
    inline.run()
    assert stub.refresh().completed()
    stub.archive("done")
    other = WorkflowStub.make(tenancy.TenantOrder, "traced-uws")
    submitted = other.submit_update_with_start("rename", "x", start_args=[False])
    assert submitted.update is not None and submitted.update.accepted
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [signalled] = named(spans, "SignalWithStartWorkflow:poke")
    assert signalled["kind"] == "CLIENT"
    assert signalled["attributes"]["durable_workflow.workflow.run_id"] == sent.start.run_id
    # The run started by it is in its trace, its tasks under the client span.
    tasks = named(spans, "WorkflowTask:tests.tenancy.order")
    assert {t["trace_id"] for t in tasks} == {signalled["trace_id"]}
    assert {t["parent_id"] for t in tasks} == {signalled["span_id"]}
    [archived] = named(spans, "ArchiveWorkflow:tests.tenancy.order")
    assert archived["kind"] == "CLIENT"
    [updated] = named(spans, "UpdateWithStartWorkflow:rename")
    assert updated["attributes"]["durable_workflow.message.name"] == "rename"


def test_a_schedule_fire_is_the_root_of_its_runs_trace(inline, tracing):
    _, exporter = tracing
    ScheduleManager.create(
        schedule_id="traced-hourly",
        workflow="tests.tenancy.order",
        cron_expression="0 * * * *",
        arguments=[False],
    )
    instance_id = ScheduleManager.trigger("traced-hourly")
    assert instance_id is not None
    inline.run()
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [fired] = named(spans, "ScheduleFire:traced-hourly")
    assert fired["parent_id"] is None
    assert fired["attributes"]["durable_workflow.schedule.id"] == "traced-hourly"
    assert fired["attributes"]["durable_workflow.schedule.trigger_number"] == 1
    assert fired["attributes"]["durable_workflow.workflow.instance_id"] == instance_id
    tasks = named(spans, "WorkflowTask:tests.tenancy.order")
    assert tasks and {t["parent_id"] for t in tasks} == {fired["span_id"]}
    assert {s["trace_id"] for s in spans} == {fired["trace_id"]}
    assert not named(spans, "StartWorkflow:tests.tenancy.order")


def test_a_run_started_untraced_is_still_one_trace(inline, tracing):
    _, exporter = tracing
    with override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "INTERCEPTORS": []}):
        stub = WorkflowStub.make(traced.Order, "traced-untraced")
        stub.start(1)  # as a schedule starts its runs: no client span, no trace context
    inline.run()
    with travel(seconds=2):
        inline.run()
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    tasks = named(spans, "WorkflowTask:tests.traced.order")
    assert len(tasks) >= 3
    assert len({s["trace_id"] for s in spans}) == 1
    assert len({t["parent_id"] for t in tasks}) == 1  # the run's own (unexported) root
    assert tasks[0]["parent_id"] not in {s["span_id"] for s in spans}


@pytest.mark.parametrize("sticky", [True, False])
def test_a_local_activity_has_a_span_per_attempt(inline, tracing, sticky):
    _, exporter = tracing
    with override_settings(
        DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, "STICKY_ENABLED": sticky}
    ):
        stub = WorkflowStub.make(traced.Local, "traced-local")
        stub.start()
        inline.run()
    assert stub.result(timeout=5) == "L"
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    [scheduled] = named(spans, "StartActivity:tests.traced.step")
    attempts = named(spans, "RunActivity:tests.traced.step")
    assert [a["attributes"]["durable_workflow.activity.attempt"] for a in attempts] == [1, 2]
    assert all(a["parent_id"] == scheduled["span_id"] for a in attempts)
    assert len(named(spans, "CompleteWorkflow")) == 1
