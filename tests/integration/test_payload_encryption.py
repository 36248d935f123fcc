"""Encrypted payloads end to end: unreadable in the database, readable through the library.

The client, queries, the replayer (stored runs and exported bundles) and the admin
all decode through the same codec chain; keys rotate without stranding old runs.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.db.models import TextField
from django.db.models.functions import Cast
from django.test import override_settings
from django.urls import reverse

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from durable_workflow.codec import chain, envelope
from durable_workflow.models import HistoryEvent, WorkflowRun
from durable_workflow.operations.export import build_bundle
from durable_workflow.operations.replay import replay_file, replay_instance
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "4111-1111-1111-1111"
OLD_KEY = base64.b64encode(os.urandom(32)).decode()
NEW_KEY = base64.b64encode(os.urandom(32)).decode()


def codec_settings(keys: dict[str, str], current: str | None, **extra: Any) -> dict[str, Any]:
    return {
        **settings.DURABLE_WORKFLOW,
        "PAYLOAD_CODECS": ["zlib", "aes-gcm"],
        "PAYLOAD_ENCRYPTION_KEYS": keys,
        "PAYLOAD_ENCRYPTION_KEY_ID": current,
        **extra,
    }


class Charge(Activity):
    type_key = "tests.encryption.charge"

    def handle(self, card: str) -> str:
        return f"charged {card}"


class Payment(Workflow):
    type_key = "tests.encryption.payment"

    def __init__(self) -> None:
        self.note = ""

    @dw.query("note")
    def current_note(self) -> str:
        return self.note

    @dw.signal("approve")
    def approve(self, note: str) -> None:
        self.note = note

    def handle(self, card: str) -> dict[str, str]:
        receipt = dw.activity(Charge, card)
        dw.wait(lambda: bool(self.note))
        return {"receipt": receipt, "note": self.note}


@pytest.fixture
def encrypted() -> Iterator[None]:
    with override_settings(DURABLE_WORKFLOW=codec_settings({"old": OLD_KEY}, "old")):
        assert [t.name for t in chain.current()] == ["zlib", "aes-gcm"]
        yield


def raw_payload_text(run_id: Any) -> str:
    """The run's arguments, output and history payloads as the database holds them (cast in SQL)."""
    runs = WorkflowRun.objects.filter(id=run_id).annotate(
        a=Cast("arguments", TextField()), o=Cast("output", TextField())
    )
    events = HistoryEvent.objects.filter(run_id=run_id).annotate(p=Cast("payload", TextField()))
    texts = [t for row in runs.values_list("a", "o") for t in row]
    texts += list(events.values_list("p", flat=True))
    assert len(texts) > 4 and all(isinstance(t, str) for t in texts)
    return "\n".join(texts)


def run_payment(inline: Any, instance_id: str) -> Any:
    stub = start("tests.encryption.payment", instance_id, SECRET)
    inline.run()
    stub.signal("approve", f"ok for {SECRET}")
    inline.run()
    return stub.refresh()


def test_payloads_are_unreadable_in_the_database_and_readable_through_the_library(
    inline, encrypted, tmp_path: pathlib.Path
):
    stub = run_payment(inline, "enc-1")
    assert stub.status() == "completed"
    expected = {"receipt": f"charged {SECRET}", "note": f"ok for {SECRET}"}
    assert stub.output() == expected
    assert stub.query("note") == f"ok for {SECRET}"

    run = WorkflowRun.objects.get(id=stub.run_id())
    raw = raw_payload_text(run.id)
    assert SECRET not in raw
    assert '"encodings"' in raw
    assert envelope.encodings(run.output) == ["zlib", "aes-gcm"]

    assert replay_instance("enc-1").ok
    bundle = build_bundle("enc-1")
    text = json.dumps(bundle)
    assert SECRET not in text
    path = tmp_path / "enc-1.json"
    path.write_text(text)
    result = replay_file(path)
    assert result.ok, result.message


def test_a_rotated_key_keeps_old_runs_readable_and_encrypts_new_ones(inline, encrypted):
    old = run_payment(inline, "enc-rot-1")
    rotated = codec_settings({"old": OLD_KEY, "new": NEW_KEY}, "new")
    with override_settings(DURABLE_WORKFLOW=rotated):
        assert old.refresh().output()["note"] == f"ok for {SECRET}"
        assert replay_instance("enc-rot-1").ok
        new = run_payment(inline, "enc-rot-2")
        assert new.output()["receipt"] == f"charged {SECRET}"
        run = WorkflowRun.objects.get(id=new.run_id())
        frame = base64.b64decode(run.output["blob"])
        assert frame[2 : 2 + frame[1]] == b"new"
    retired_dropped = codec_settings({"new": NEW_KEY}, "new")
    with override_settings(DURABLE_WORKFLOW=retired_dropped):
        assert new.refresh().output()["note"] == f"ok for {SECRET}"
        with pytest.raises(chain.PayloadKeyUnavailable):
            old.refresh().output()


def test_admin_decodes_with_the_key_and_shows_placeholders_without_it(
    inline, encrypted, admin_client
):
    stub = run_payment(inline, "enc-admin")
    run_id = stub.run_id()
    pages = [
        reverse("admin:durable_workflow_workflowrun_change", args=[run_id]),
        reverse("admin:durable_workflow_workflowrun_timeline", args=[run_id]),
    ]
    for page in pages:
        html = admin_client.get(page).content.decode()
        assert SECRET in html, page
    with override_settings(DURABLE_WORKFLOW=codec_settings({"other": NEW_KEY}, "other")):
        for page in pages:
            html = admin_client.get(page).content.decode()
            assert SECRET not in html
            assert "encrypted with key" in html and "old" in html


def test_admin_hides_payloads_from_operators_without_the_decode_permission(
    inline, encrypted, client
):
    stub = run_payment(inline, "enc-perm")
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    client.force_login(viewer)
    page = reverse("admin:durable_workflow_workflowrun_timeline", args=[stub.run_id()])
    with override_settings(
        DURABLE_WORKFLOW=codec_settings(
            {"old": OLD_KEY}, "old", PAYLOAD_DECODE_PERMISSION="durable_workflow.change_workflowrun"
        )
    ):
        html = client.get(page).content.decode()
        assert client.get(page).status_code == 200
        assert SECRET not in html
        assert "lack the permission" in html
        viewer.user_permissions.add(Permission.objects.get(codename="change_workflowrun"))
        viewer = User.objects.get(pk=viewer.pk)
        client.force_login(viewer)
        assert SECRET in client.get(page).content.decode()


def test_a_run_without_its_key_fails_the_task_not_the_worker(inline, encrypted):
    stub = start("tests.encryption.payment", "enc-nokey", SECRET)
    with override_settings(DURABLE_WORKFLOW=codec_settings({"other": NEW_KEY}, "other")):
        inline.run()  # the workflow task cannot read its arguments: it fails, the loop goes on
        run = WorkflowRun.objects.get(id=stub.run_id())
        assert run.status != "completed"
        from durable_workflow.models import WorkflowFailure

        [failure] = WorkflowFailure.objects.filter(run_id=run.id)
        assert "payload_key_unavailable" in failure.message


def reencrypt_command(*args: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("workflow_reencrypt", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def old_key_envelopes(value: Any) -> list[dict[str, Any]]:
    from durable_workflow.codec import rekey

    found: list[dict[str, Any]] = []
    rekey.rewrite_value(
        value, lambda env: found.append(env) if rekey.key_id(env) == "old" else None
    )
    return found


def test_reencrypt_command_moves_old_payloads_to_the_current_key(inline, encrypted):
    from durable_workflow.codec import rekey

    old = run_payment(inline, "enc-re-1")
    rotated = codec_settings({"old": OLD_KEY, "new": NEW_KEY}, "new")
    with override_settings(DURABLE_WORKFLOW=rotated):
        out = reencrypt_command("--dry-run", "--batch-size", "2")
        assert "would rewrite" in out and "old: " in out
        run = WorkflowRun.objects.get(id=old.run_id())
        assert rekey.key_id(run.output) == "old"  # a dry run writes nothing
        assert "rewrote" in reencrypt_command("--batch-size", "2")
        run.refresh_from_db()
        assert rekey.key_id(run.output) == "new"
        for event in HistoryEvent.objects.filter(run_id=run.id):
            assert old_key_envelopes(event.payload) == []
        assert "rewrote 0 payloads" in reencrypt_command()  # run again: nothing left to do
    with override_settings(DURABLE_WORKFLOW=codec_settings({"new": NEW_KEY}, "new")):
        assert old.refresh().output()["note"] == f"ok for {SECRET}"
        assert replay_instance("enc-re-1").ok
        assert SECRET not in raw_payload_text(run.id)


def test_reencrypt_command_refuses_without_a_current_key():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="no current encryption key"):
        call_command("workflow_reencrypt", stdout=io.StringIO(), stderr=io.StringIO())
