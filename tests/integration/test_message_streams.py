"""Message streams: ordered delivery, durable cursor, idempotent sends, workflow-to-workflow."""

from __future__ import annotations

import pytest

from durable_workflow.models import WorkflowMessage
from tests.integration.helpers import event_types, events_of, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_messages_are_received_in_order_with_a_durable_cursor(inline):
    stub = start("tests.inbox", "inbox-1", 3)
    inline.run()
    for ref in ("a", "b"):
        stub.send_message("requests", ref)
    inline.run()
    stub.send_message("requests", "c")
    inline.run()
    out = stub.refresh().output()
    assert out == {"seen": ["a", "b", "c"], "cursor": 3}
    cursors = [e["cursor"] for e in events_of(stub, "MessageCursorAdvanced")]
    assert cursors == sorted(cursors) and cursors[-1] == 3
    assert set(WorkflowMessage.objects.values_list("status", flat=True)) == {"consumed"}
    assert [m.sequence for m in WorkflowMessage.objects.order_by("sequence")] == [1, 2, 3]


def test_a_repeated_idempotency_key_sends_once(inline):
    stub = start("tests.inbox", "inbox-2", 1)
    first = stub.send_message("requests", "x", idempotency_key="k1")
    again = stub.send_message("requests", "x", idempotency_key="k1")
    assert first["message_id"] == again["message_id"]
    inline.run()
    assert stub.refresh().output() == {"seen": ["x"], "cursor": 1}
    assert WorkflowMessage.objects.count() == 1


def test_workflow_to_workflow_reply(inline):
    waiter = start("tests.inbox", "inbox-waiter", 1)
    sender = start("tests.inbox", "inbox-sender", 1, "inbox-waiter")
    sender.send_message("requests", "ping")
    inline.run()
    assert sender.refresh().completed()
    assert "MessageSent" in event_types(sender)
    reply = WorkflowMessage.objects.get(stream_key="replies")
    assert reply.target_instance_id == "inbox-waiter" and reply.payload_reference == "done:1"
    assert reply.sender_instance_id == "inbox-sender"
    assert waiter.refresh().running()  # it listens on "requests", not "replies"


def test_pending_messages_and_cursor_follow_continue_as_new(inline):
    from django.test import override_settings

    with override_settings(DURABLE_WORKFLOW={"CONTINUE_AS_NEW_EVENT_THRESHOLD": 6}):
        stub = start("tests.inbox", "inbox-can", 4)
        inline.run()
        for ref in ("a", "b", "c", "d"):
            stub.send_message("requests", ref)
            inline.run()
    stub.refresh()
    assert stub.output()["seen"][-1] == "d"
    assert stub.output()["cursor"] == 4  # the cursor carried across runs
    from durable_workflow.models import WorkflowRun

    assert WorkflowRun.objects.filter(instance_id="inbox-can").count() > 1
