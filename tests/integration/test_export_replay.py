"""History export bundles (schema, checksum, redaction) and the replay check."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from durable_workflow.operations import integrity, schemas
from durable_workflow.operations.export import ExportError, build_bundle
from durable_workflow.operations.replay import replay_bundle, replay_instance
from tests.integration.helpers import start
from tests.testapp import workflows

pytestmark = pytest.mark.django_db(transaction=True)


def completed(instance_id: str, workflow: str = "tests.sequential", *args):
    stub = start(workflow, instance_id, *(args or ("ada",)))
    return stub


def test_bundle_matches_its_schema_and_checksum(inline):
    stub = completed("export-1")
    inline.run()
    assert stub.refresh().completed()
    bundle = build_bundle("export-1")
    schemas.validate(bundle, schemas.HISTORY_EXPORT)
    assert bundle["schema"] == "durable-workflow.v2.history-export"
    assert bundle["schema_version"] == 1
    assert bundle["workflow"]["source_runtime"] == "embedded"
    assert bundle["selected_run"]["run_id"] == stub.run_id()
    assert bundle["history_complete"] is True
    assert [e["event_type"] for e in bundle["history_events"]] == [
        e.event_type for e in stub.history()
    ]
    assert len(bundle["activities"]) == 2
    assert all(a["attempts"] for a in bundle["activities"])
    block = bundle["integrity"]
    assert block["canonicalization"] == "json-recursive-ksort-v1"
    body = {k: v for k, v in bundle.items() if k != "integrity"}
    import hashlib

    assert block["checksum"] == hashlib.sha256(integrity.canonical_json(body)).hexdigest()
    assert "signature" not in block
    assert integrity.verify(bundle).valid
    bundle["history_events"][0]["payload"]["tampered"] = True
    assert integrity.verify(bundle).reason == "checksum_mismatch"


def test_signing_key_adds_a_verifiable_signature(inline, monkeypatch):
    completed("export-signed")
    inline.run()
    monkeypatch.setenv("DW_V2_HISTORY_EXPORT_SIGNING_KEY", "s3cret")
    monkeypatch.setenv("DW_V2_HISTORY_EXPORT_SIGNING_KEY_ID", "k1")
    bundle = build_bundle("export-signed")
    schemas.validate(bundle, schemas.HISTORY_EXPORT)
    assert bundle["integrity"]["signature_algorithm"] == "hmac-sha256"
    assert bundle["integrity"]["key_id"] == "k1"
    assert integrity.verify(bundle, signing_key="s3cret").valid
    assert integrity.verify(bundle, signing_key="wrong").reason == "signature_mismatch"


class Redactor:
    def redact(self, value, context):
        return {"redacted": True, "path": context["path"], "category": context["category"]}


def test_redactor_replaces_payloads_and_lists_paths(inline):
    completed("export-redacted")
    inline.run()
    bundle = build_bundle("export-redacted", redactor=Redactor())
    schemas.validate(bundle, schemas.HISTORY_EXPORT)
    redaction = bundle["redaction"]
    assert redaction["applied"] is True
    assert redaction["policy"].endswith("Redactor")
    assert "selected_run.arguments" in redaction["paths"]
    assert bundle["selected_run"]["arguments"]["category"] == "workflow_arguments"
    assert all(e["payload"]["redacted"] for e in bundle["history_events"])
    assert integrity.verify(bundle).valid  # sealed after redaction
    assert replay_bundle(bundle).status == "error"


def test_unknown_instance_or_run():
    with pytest.raises(ExportError):
        build_bundle("nobody")


def test_export_command_writes_a_file_and_replay_reads_it(inline, tmp_path):
    stub = completed("export-cli")
    inline.run()
    target = tmp_path / "bundles" / "export-cli.json"
    call_command(
        "workflow_history_export",
        "export-cli",
        "--output",
        str(target),
        "--pretty",
        stderr=io.StringIO(),
    )
    bundle = json.loads(target.read_text())
    assert bundle["selected_run"]["run_id"] == stub.run_id()
    assert "\n  " in target.read_text()  # --pretty
    out = io.StringIO()
    call_command("workflow_replay", str(tmp_path / "bundles"), stdout=out)
    assert "1 of 1 replayed cleanly" in out.getvalue()


def test_export_command_to_stdout_and_run_id(inline):
    stub = completed("export-stdout")
    inline.run()
    out = io.StringIO()
    call_command("workflow_history_export", "export-stdout", "--run-id", stub.run_id(), stdout=out)
    assert json.loads(out.getvalue())["selected_run"]["run_id"] == stub.run_id()
    with pytest.raises(CommandError):
        call_command("workflow_history_export", "export-stdout", "--run-id", "not-a-run")


def test_changed_workflow_is_reported_as_non_deterministic(inline, monkeypatch, tmp_path):
    completed("replay-changed")
    inline.run()
    path = tmp_path / "replay-changed.json"
    path.write_text(json.dumps(build_bundle("replay-changed")))
    assert replay_instance("replay-changed").ok

    monkeypatch.setitem(workflows.CODE_VERSION, "sequential", 2)  # a timer now sits at step 2
    result = replay_instance("replay-changed")
    assert result.status == "nondeterministic"
    assert result.step == 2
    assert result.recorded == "ActivityScheduled(tests.add)"
    assert result.requested == "TimerScheduled"

    out = io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("workflow_replay", str(path), "--json", stdout=out)
    assert excinfo.value.returncode == 1
    report = json.loads(out.getvalue())
    assert report["failed"] == 1
    assert report["results"][0]["step"] == 2
    assert report["results"][0]["requested"] == "TimerScheduled"


def test_tampered_bundle_is_refused_unless_verification_is_skipped(inline, tmp_path):
    completed("replay-tampered")
    inline.run()
    bundle = build_bundle("replay-tampered")
    bundle["exported_at"] = "2000-01-01T00:00:00+00:00"
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(bundle))
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("workflow_replay", str(path), stdout=out)
    assert "checksum_mismatch" in out.getvalue()
    call_command("workflow_replay", str(path), "--no-verify", stdout=io.StringIO())


def test_open_run_replays_up_to_its_last_workflow_task(inline):
    stub = start("tests.sequential", "replay-open", "ada")
    from durable_workflow import executor
    from durable_workflow.models import Task

    task = Task.objects.get(run_id=stub.run_id(), task_type="workflow", status="ready")
    executor.run_workflow_task(task.id)  # step 1 scheduled, activity still pending
    result = replay_instance("replay-open")
    assert result.ok, result.message
    bundle = build_bundle("replay-open")
    assert bundle["history_complete"] is False
    schemas.validate(bundle, schemas.HISTORY_EXPORT)


def test_code_asking_for_more_steps_is_reported(inline, monkeypatch):
    completed("replay-extra")
    inline.run()
    original = workflows.Sequential.handle

    def longer(self, name):
        result = original(self, name)
        import durable_workflow as dw

        dw.timer(5)
        return result

    monkeypatch.setattr(workflows.Sequential, "handle", longer)
    result = replay_instance("replay-extra")
    assert result.status == "nondeterministic"
    assert result.step == 3
    assert result.recorded == "WorkflowCompleted"
    assert result.requested == "TimerScheduled"


def test_a_bundle_naming_any_module_as_exception_class_imports_nothing(
    inline, tmp_path, monkeypatch
):
    """Issue 18, item 6: a bundle given to workflow_replay once chose a module to import."""
    import sys

    marker = tmp_path / "imported"
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "dw_bundle_payload.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "class Boom(Exception):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.delitem(sys.modules, "dw_bundle_payload", raising=False)
    start("tests.catch-failure", "hostile-bundle")
    inline.run()
    bundle = build_bundle("hostile-bundle")
    for event in bundle["history_events"]:
        if event["event_type"] == "ActivityFailed":
            event["payload"]["exception_class"] = "dw_bundle_payload.Boom"
            event["payload"]["exception_type"] = "dw_bundle_payload.Boom"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(bundle))
    out = io.StringIO()
    with pytest.raises(CommandError):  # PaymentDeclined is no longer caught: the replay differs
        call_command("workflow_replay", str(path), "--no-verify", "--json", stdout=out)
    assert json.loads(out.getvalue())["failed"] == 1
    assert not marker.exists()
    assert "dw_bundle_payload" not in sys.modules
    assert replay_instance("hostile-bundle").ok  # the stored history still replays


@pytest.mark.parametrize(
    "settings_key",
    ["EXCEPTION_TYPES", "EXCEPTION_CLASS_ALIASES"],
)
def test_settings_map_recorded_failures_to_classes(inline, settings, settings_key):
    """A failure recorded under a type key, or under a class path that has moved."""
    from durable_workflow.models import HistoryEvent

    start("tests.catch-failure", f"aliased-{settings_key}")
    inline.run()
    event = HistoryEvent.objects.get(
        run__instance_id=f"aliased-{settings_key}", event_type="ActivityFailed"
    )
    recorded = "billing.payment-declined" if settings_key == "EXCEPTION_TYPES" else "old.Declined"
    payload = {**event.payload, "exception_type": recorded, "exception_class": "old.Declined"}
    HistoryEvent.objects.filter(id=event.id).update(payload=payload)  # as if written long ago
    assert not replay_instance(f"aliased-{settings_key}").ok  # nothing maps it: not caught
    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        settings_key: {recorded: "tests.testapp.workflows.PaymentDeclined"},
    }
    assert replay_instance(f"aliased-{settings_key}").ok
