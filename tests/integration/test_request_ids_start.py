"""Issue 23, item 9 (the rest): a start, and the management commands that issue
commands, repeated under one request id answer with the first outcome."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from durable_workflow import InvalidValueError, StartOptions, WorkflowStub
from durable_workflow.models import Task, WorkflowCommand, WorkflowRun
from tests.integration.helpers import start
from tests.integration.test_webhooks import ORDER, post

pytestmark = pytest.mark.django_db(transaction=True)


def _starts(instance_id: str) -> int:
    return WorkflowCommand.objects.filter(instance_id=instance_id, command_type="start").count()


def test_a_start_retried_with_its_request_id_answers_the_first_start(inline):
    first = WorkflowStub.make("tests.sequential", "req-start").start(
        StartOptions(request_id="s-1"), "ada"
    )
    again = WorkflowStub.load("req-start").attempt_start(StartOptions(request_id="s-1"), "ada")
    assert first.outcome == again.outcome == "started_new"
    assert again == first
    assert _starts("req-start") == 1
    other = WorkflowStub.load("req-start").attempt_start(StartOptions(request_id="s-2"), "ada")
    assert (other.outcome, other.rejection_reason) == (
        "rejected_duplicate",
        "instance_already_started",
    )
    repeated = WorkflowStub.load("req-start").attempt_start(StartOptions(request_id="s-2"), "ada")
    assert repeated == other
    assert _starts("req-start") == 2
    assert WorkflowRun.objects.filter(instance_id="req-start").count() == 1


def test_a_refused_start_is_refused_the_same_way_again(inline):
    holder = WorkflowStub.make("tests.approval", "req-holder")
    holder.start(StartOptions(deduplication_id="d"), "signal")
    options = StartOptions(deduplication_id="d", request_id="s-3")
    refused = WorkflowStub.make("tests.approval", "req-second").attempt_start(options, "signal")
    assert refused.rejection_reason == "deduplication_id_in_use"
    again = WorkflowStub.load("req-second").attempt_start(options, "signal")
    assert again == refused
    assert again.holder_instance_id == "req-holder"
    assert _starts("req-second") == 1


def test_request_ids_on_starts_are_checked():
    for bad in ("", "x" * 256, "nul\x00", "sur\ud800", 5):
        with pytest.raises(InvalidValueError):
            StartOptions(request_id=bad)  # type: ignore[arg-type]


def test_the_start_webhook_takes_the_x_request_id_header(client, inline, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    body = {"workflow_id": "req-hook-start", "order_id": 7}
    first = post(client, ORDER, body, **{"X-Request-Id": "h-1"})
    again = post(client, ORDER, body, **{"X-Request-Id": "h-1"})
    assert first.status_code == again.status_code == 202, again.json()
    assert again.json()["command_id"] == first.json()["command_id"]
    assert _starts("req-hook-start") == 1
    other = post(client, ORDER, body, **{"X-Request-Id": "h-2"})
    assert other.json()["outcome"] == "rejected_duplicate"


def _command(*args: str) -> dict:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    text = out.getvalue().strip()
    # workflow_archive prints one indented document, workflow_repair a line per target
    return json.loads(text if text.startswith("{\n") else text.splitlines()[-1])


def test_the_repair_command_takes_a_request_id(inline):
    stub = start("tests.approval", "req-cli-repair", "signal")
    inline.run()
    Task.objects.filter(run_id=stub.run_id()).delete()
    first = _command("workflow_repair", "--instance-id", "req-cli-repair", "--request-id", "c")
    assert first["outcome"] == "repair_dispatched"
    Task.objects.filter(run_id=stub.run_id()).delete()
    again = _command("workflow_repair", "--instance-id", "req-cli-repair", "--request-id", "c")
    assert again["command_id"] == first["command_id"]
    assert not Task.objects.filter(run_id=stub.run_id()).exists()
    with pytest.raises(CommandError, match="--request-id"):
        call_command("workflow_repair", "--instance-id", "x", "--request-id", "x" * 201)


def test_the_archive_command_takes_a_request_id(inline):
    start("tests.sequential", "req-cli-archive", "ada")
    inline.run()
    args = ("workflow_archive", "--instance-id", "req-cli-archive", "--request-id", "a")
    assert _command(*args)["outcomes"] == {"archived": 1}
    assert _command(*args)["outcomes"] == {"archived": 1}  # the first answer, again
    archives = WorkflowCommand.objects.filter(instance_id="req-cli-archive", command_type="archive")
    assert archives.count() == 1


def test_commands_act_in_the_namespace_they_are_given(inline):
    plain = start("tests.sequential", "req-cli-ns", "ada")
    billing = WorkflowStub.make("tests.sequential", "req-cli-ns", namespace="billing")
    billing.start("bob")
    inline.run()
    _command("workflow_archive", "--instance-id", "req-cli-ns", "--namespace", "billing")
    assert WorkflowStub.load("req-cli-ns", namespace="billing").archived_at() is not None
    assert plain.refresh().archived_at() is None
    with pytest.raises(CommandError, match="--namespace"):
        call_command("workflow_repair", "--instance-id", "x", "--namespace", "a/b")
    out = io.StringIO()
    call_command("workflow_history_export", "req-cli-ns", "--namespace", "billing", stdout=out)
    assert json.loads(out.getvalue())["selected_run"]["run_id"] == billing.run_id()
