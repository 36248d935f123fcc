"""OpenTelemetry tracing through real Celery workers (PostgreSQL): the caller's trace
goes on in the worker's workflow tasks and activity attempts, across a worker restart,
and the new worker's cold replay traces nothing twice.

The workers export their spans as JSON lines to a file (``DW_OTEL_SPANS_PATH``); this
process keeps its own in memory.
"""

from __future__ import annotations

import json
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
from tests.acceptance.conftest import wait_for
from tests.integration.helpers import events_of
from tests.otel_spans import read_spans, render_tree, span_record
from tests.testapp import traced
from tests.testing.test_fake_vs_real import WorkerDriver

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

TRACED = {"INTERCEPTORS": ["durable_workflow.contrib.opentelemetry.TracingInterceptor"]}


def test_one_trace_across_the_client_two_workers_and_a_restart(start_worker, tmp_path):
    path = str(tmp_path / "spans.jsonl")
    env = {"DW_EXTRA_SETTINGS_JSON": json.dumps(TRACED), "DW_OTEL_SPANS_PATH": path}
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    here = {"INTERCEPTORS": [TracingInterceptor(tracer_provider=provider)]}
    with override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, **here}):
        first = start_worker(beat=False, env=env)
        with provider.get_tracer("tests").start_as_current_span("POST /orders"):
            stub = WorkflowStub.make(traced.Order, "traced-worker-1")
            stub.start(1)
        # The retry, the one-second timer and the child, then the run waits for a signal.
        wait_for(
            lambda: bool(events_of(stub, "ChildRunCompleted")),
            timeout=60,
            message=first.output()[-3000:],
        )
        WorkerDriver(first).settle()
        first.stop()  # the next worker starts cold: it replays the history
        second = start_worker(beat=False, env=env)
        stub.signal("proceed")
        assert stub.result(timeout=60) == ["A", "C", "B"]
        second.stop()  # every span it ended is in the file
    spans = [span_record(s) for s in exporter.get_finished_spans()] + read_spans(path)

    [signal] = named(spans, "SignalWorkflow:proceed")
    assert len({s["trace_id"] for s in spans if s is not signal}) == 1
    assert len({s["pid"] for s in spans}) == 3  # this process and both workers
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
    }, render_tree(spans)

    by_id = {s["span_id"]: s for s in spans}
    [start] = named(spans, "StartWorkflow:tests.traced.order")
    tasks = named(spans, "WorkflowTask:tests.traced.order")
    assert all(t["parent_id"] == start["span_id"] for t in tasks)
    after_restart = [t for t in tasks if t["pid"] == second.process.pid]
    assert after_restart, render_tree(spans)
    assert after_restart[0]["attributes"]["durable_workflow.workflow_task.sticky"] == "cold"
    assert after_restart[0]["attributes"]["durable_workflow.workflow_task.replay"] is True
    for attempt in named(spans, "RunActivity:tests.traced.step"):
        assert by_id[attempt["parent_id"]]["name"] == "StartActivity:tests.traced.step"
    retried = [
        a["attributes"]["durable_workflow.activity.attempt"]
        for a in named(spans, "RunActivity:tests.traced.step")
        if a["status"] == "ERROR"
    ]
    assert retried == [1]
    [child_start] = named(spans, "StartChildWorkflow:tests.traced.child")
    for task in named(spans, "WorkflowTask:tests.traced.child"):
        assert task["parent_id"] == child_start["span_id"]
    [handled] = named(spans, "HandleSignal:proceed")
    assert handled["links"] == [signal["span_id"]]
    assert handled["pid"] == second.process.pid


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]
