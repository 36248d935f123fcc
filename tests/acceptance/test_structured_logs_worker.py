"""A real worker's JSON log lines say which workflow they are about (issue 25, item 6)."""

from __future__ import annotations

import json

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.models import ActivityExecution

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_a_workers_json_lines_carry_the_workflow_fields(start_worker):
    worker = start_worker(env={"DW_TEST_JSON_LOGS": "1"})
    stub = WorkflowStub.make("tests.retrying", "json-logs")
    stub.start(2)
    stub.wait(timeout=60)
    assert stub.output() == "ok after 2"
    worker.stop()
    lines = []
    for text in worker.output().splitlines():
        if text.startswith("{"):
            lines.append(json.loads(text))
    mine = [line for line in lines if line.get("dw_instance_id") == "json-logs"]
    execution = str(ActivityExecution.objects.get(run_id=stub.run_id()).id)
    assert [(line["logger"], line["dw_attempt"]) for line in mine] == [
        ("tests.activities", 1),
        ("durable_workflow", 1),
        ("tests.activities", 2),
    ]
    for line in mine:
        assert line["dw_workflow_type"] == "tests.retrying"
        assert line["dw_run_id"] == stub.run_id()
        assert line["dw_activity_id"] == execution
    assert "retry in 0 s" in mine[1]["message"]
    started = [line for line in lines if "registered worker" in line["message"]]
    assert started and started[0]["dw_run_id"] is None  # a line about no workflow
