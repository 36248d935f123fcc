"""External payload storage end to end: offloaded rows, verification, limits, pruning."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.test import override_settings

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from durable_workflow.codec import envelope, external
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.models import (
    ActivityAttempt,
    ActivityExecution,
    HistoryEvent,
    Task,
    WorkflowFailure,
    WorkflowRun,
)
from durable_workflow.operations.prune import delete_runs
from durable_workflow.payload_storage import (
    DjangoStorageDriver,
    ExternalPayloadIntegrityError,
    FilesystemDriver,
    MemoryDriver,
    configure_from_settings,
    delete_unreferenced,
    live_references,
    references_for_runs,
)
from durable_workflow.store import database
from durable_workflow.store.activities import execution_results
from tests.integration.helpers import events_of, failures, start

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024
THRESHOLD = 64 * 1024


class Render(Activity):
    type_key = "tests.external.render"

    def handle(self, document: str, size: int) -> str:
        return (document[:1] or "r") * size


class Document(Workflow):
    type_key = "tests.external.document"

    def handle(self, document: str) -> dict[str, Any]:
        rendered = dw.activity(Render, document, MIB)
        return {"pages": len(rendered) // 4096, "rendered": rendered}


def storage_settings(**extra: Any) -> dict[str, Any]:
    return {**settings.DURABLE_WORKFLOW, "PAYLOAD_OFFLOAD_THRESHOLD_BYTES": THRESHOLD, **extra}


@pytest.fixture(params=["filesystem", "django"])
def driver(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Any]:
    """The filesystem driver, or Django's FileSystemStorage through STORAGES, from settings."""
    if request.param == "filesystem":
        overrides: dict[str, Any] = {
            "DURABLE_WORKFLOW": storage_settings(
                PAYLOAD_STORAGE="filesystem", PAYLOAD_STORAGE_OPTIONS={"root": str(tmp_path)}
            )
        }
    else:
        overrides = {
            "STORAGES": {
                **settings.STORAGES,
                "payloads": {
                    "BACKEND": "django.core.files.storage.FileSystemStorage",
                    "OPTIONS": {"location": str(tmp_path)},
                },
            },
            "DURABLE_WORKFLOW": storage_settings(
                PAYLOAD_STORAGE="django", PAYLOAD_STORAGE_OPTIONS={"alias": "payloads"}
            ),
        }
    with override_settings(**overrides):
        policy = external.current()
        assert policy is not None
        yield policy.driver
    assert external.current() is None


def overwrite(driver: Any, uri: str, data: bytes) -> None:
    """Tamper with a stored object behind the library's back."""
    if isinstance(driver, FilesystemDriver):
        driver._path(uri).write_bytes(data)
    else:
        name = driver.name(uri)
        driver.storage.delete(name)
        assert driver.storage.save(name, ContentFile(data)) == name
    external.clear_cache()  # as if read by another process


def flip_last_byte(driver: Any, uri: str) -> None:
    data = bytearray(driver.get(uri))
    data[-1] ^= 0x01
    overwrite(driver, uri, bytes(data))


def ref(value: Any) -> dict[str, Any]:
    assert envelope.is_external(value), value
    return value["external_storage"]  # type: ignore[no-any-return]


def test_large_arguments_and_results_live_in_storage_and_rows_hold_references(inline, driver):
    document = "d" * (512 * 1024)
    stub = start("tests.external.document", "ext-1", document)
    inline.run()
    stub.refresh()
    assert stub.status() == "completed"
    output = stub.output()
    assert output == {"pages": 256, "rendered": "d" * MIB}

    run = WorkflowRun.objects.get(id=stub.run_id())
    execution = ActivityExecution.objects.get(run_id=run.id)
    [started] = events_of(stub, "WorkflowStarted")
    [completed] = events_of(stub, "ActivityCompleted")
    [finished] = events_of(stub, "WorkflowCompleted")
    assert ref(run.arguments) == ref(started["arguments"])
    assert ref(execution.arguments)["size_bytes"] > 512 * 1024
    assert execution.result is None  # the result is kept by its history event only
    result = execution_results([execution])[execution.id]
    assert ref(result) == ref(completed["result"])
    assert ref(result)["size_bytes"] > MIB
    assert ref(run.output) == ref(finished["result"])
    for reference in (ref(run.arguments), ref(result), ref(run.output)):
        assert reference["schema"] == "durable-workflow.v2.external-payload-reference.v1"
        assert reference["codec"] == "avro"
        data = driver.get(reference["uri"])
        assert len(data) == reference["size_bytes"]
    # No row carries the bytes themselves; history stays small.
    history_bytes = sum(
        len(json.dumps(payload))
        for payload in HistoryEvent.objects.filter(run_id=run.id).values_list("payload", flat=True)
    )
    assert history_bytes < 16 * 1024
    assert len(json.dumps(execution.arguments)) < 1024


def test_a_tampered_output_fails_closed_on_read(inline, driver):
    stub = start("tests.external.document", "ext-2", "t" * 100)
    inline.run()
    run = WorkflowRun.objects.get(id=stub.run_id())
    flip_last_byte(driver, ref(run.output)["uri"])
    with pytest.raises(ExternalPayloadIntegrityError) as excinfo:
        stub.refresh().output()
    assert excinfo.value.reason == "external_payload_integrity"
    assert ref(run.output)["uri"] in str(excinfo.value)


def test_a_tampered_history_payload_is_a_replay_failure_not_a_substitute(inline, driver):
    stub = start("tests.external.document", "ext-3", "h" * (200 * 1024))
    run = WorkflowRun.objects.get(id=stub.run_id())
    flip_last_byte(driver, ref(run.arguments)["uri"])
    inline.run()
    stub.refresh()
    assert stub.status() != "completed"
    assert not ActivityExecution.objects.filter(run_id=run.id).exists()
    [failure] = failures(stub)
    assert failure.source_kind == "workflow_task"
    assert "external_payload_integrity" in failure.message
    assert Task.objects.get(run_id=run.id, task_type="workflow").status == "failed"


def test_a_missing_activity_argument_fails_the_activity_without_retry(inline, driver):
    from durable_workflow.executor import run_workflow_task

    stub = start("tests.external.document", "ext-4", "m" * (200 * 1024))
    run = WorkflowRun.objects.get(id=stub.run_id())
    run_workflow_task(Task.objects.get(run_id=run.id, task_type="workflow").id)
    execution = ActivityExecution.objects.get(run_id=run.id)
    driver.delete(ref(execution.arguments)["uri"])  # [document, size]: its own object
    inline.run()
    stub.refresh()
    assert stub.status() == "failed"
    assert ActivityAttempt.objects.filter(execution=execution).count() == 1
    [failed] = events_of(stub, "ActivityFailed")
    assert "external_payload_integrity" in json.dumps(failed)
    assert "missing" in json.dumps(failed)


@override_settings(
    DURABLE_WORKFLOW=storage_settings(
        PAYLOAD_STORAGE="memory",
        STRUCTURAL_LIMITS={"payload_size_bytes": 256 * 1024},
    )
)
def test_payload_size_limit_measures_the_real_size_not_the_reference(inline):
    driver = external.current().driver  # type: ignore[union-attr]
    assert isinstance(driver, MemoryDriver)
    stub = start("tests.external.document", "ext-limit", "l" * (300 * 1024))
    inline.run()
    stub.refresh()
    assert stub.status() == "failed"
    assert not ActivityExecution.objects.filter(run_id=stub.run_id()).exists()
    [failed] = events_of(stub, "WorkflowFailed")
    text = json.dumps(failed)
    assert "payload_size" in text
    assert str(256 * 1024) in text
    # Under the limit the same shape runs, offloaded.
    ok = start("tests.external.document", "ext-limit-ok", "k" * (100 * 1024))
    inline.run()
    assert ok.refresh().status() == "completed"


def test_offload_can_be_turned_off_while_references_still_resolve(inline, tmp_path):
    on = storage_settings(
        PAYLOAD_STORAGE="filesystem", PAYLOAD_STORAGE_OPTIONS={"root": str(tmp_path)}
    )
    with override_settings(DURABLE_WORKFLOW=on):
        stub = start("tests.external.document", "ext-off", "o" * (100 * 1024))
    run = WorkflowRun.objects.get(id=stub.run_id())
    assert envelope.is_external(run.arguments)
    with override_settings(DURABLE_WORKFLOW={**on, "PAYLOAD_OFFLOAD_THRESHOLD_BYTES": 0}):
        inline.run()
        stub.refresh()
        assert stub.status() == "completed"
        assert not envelope.is_external(WorkflowRun.objects.get(id=run.id).output)
        assert stub.output()["pages"] == 256
    # With no driver at all, a stored reference fails closed instead of decoding to nothing.
    with pytest.raises(dw.PayloadCodecError) as excinfo:
        envelope.decode(run.arguments)
    assert excinfo.value.reason == "external_payload_storage_not_configured"


# ------------------------------------------------------------------ settings


def test_settings_install_the_named_driver(tmp_path):
    options = {"root": str(tmp_path)}
    for name in ("filesystem", "durable_workflow.codec.external.FilesystemDriver"):
        with override_settings(
            DURABLE_WORKFLOW=storage_settings(
                PAYLOAD_STORAGE=name,
                PAYLOAD_STORAGE_OPTIONS=options,
                PAYLOAD_STORAGE_PREFIX="billing/",
            )
        ):
            policy = external.current()
            assert policy is not None
            assert isinstance(policy.driver, FilesystemDriver)
            assert policy.driver.root == tmp_path.resolve()
            assert (policy.threshold_bytes, policy.prefix) == (THRESHOLD, "billing/")
            env = envelope.encode("x" * THRESHOLD)
            assert "/billing/" in ref(env)["uri"]
    assert external.current() is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"PAYLOAD_STORAGE": "no.such.Driver"}, "PAYLOAD_STORAGE"),
        ({"PAYLOAD_STORAGE": "filesystem", "PAYLOAD_STORAGE_OPTIONS": {}}, "root"),
        ({"PAYLOAD_STORAGE": "memory", "PAYLOAD_STORAGE_OPTIONS": {"bogus": 1}}, "bogus"),
        ({"PAYLOAD_STORAGE": "memory", "PAYLOAD_STORAGE_PREFIX": "/abs/"}, "prefix"),
        ({"PAYLOAD_STORAGE": "django", "PAYLOAD_STORAGE_OPTIONS": {"alias": "nope"}}, "nope"),
        ({"PAYLOAD_STORAGE": "memory", "PAYLOAD_OFFLOAD_THRESHOLD_BYTES": -1}, ">= 0"),
    ],
)
def test_bad_storage_settings_are_configuration_errors(extra, message):
    with override_settings(DURABLE_WORKFLOW=storage_settings(**extra)):
        assert external.current() is None  # the signal handler logged and stayed off
        with pytest.raises(ConfigurationError, match=message):
            configure_from_settings()
    assert external.current() is None


def test_django_storage_driver_scopes_uris_to_its_alias(tmp_path):
    from django.core.files.storage import FileSystemStorage, InMemoryStorage

    memory = DjangoStorageDriver("mem", storage=InMemoryStorage())
    uri = memory.put("p/ab/abc", b"bytes")
    assert uri == "django-storage://mem/p/ab/abc"
    assert memory.get(uri) == b"bytes"
    assert memory.put("p/ab/abc", b"bytes") == uri  # exists with the same size: reused
    with pytest.raises(ValueError):
        memory.get("django-storage://other/p/ab/abc")
    with pytest.raises(ValueError):
        memory.get("django-storage://mem/../etc/passwd")
    memory.delete(uri)
    with pytest.raises(FileNotFoundError):
        memory.get(uri)
    local = DjangoStorageDriver("local", storage=FileSystemStorage(location=str(tmp_path)))
    uri = local.put("k", b"12345")
    assert local.last_modified(uri) is not None
    # A partial object under the key (another size) is not trusted: a new name is written.
    other = local.put("k", b"1234567")
    assert other != uri and local.get(other) == b"1234567"


# ------------------------------------------------------------------ retention


@override_settings(DURABLE_WORKFLOW=storage_settings(PAYLOAD_STORAGE="memory"))
def test_pruning_deletes_only_objects_no_remaining_row_references(inline):
    driver = external.current().driver  # type: ignore[union-attr]
    shared = "s" * (100 * 1024)
    old = start("tests.external.document", "ext-prune-old", shared)
    keep = start("tests.external.document", "ext-prune-keep", shared)
    inline.run()
    old_run = WorkflowRun.objects.get(id=old.run_id())
    keep_run = WorkflowRun.objects.get(id=keep.run_id())
    assert ref(old_run.arguments) == ref(keep_run.arguments)  # same content, one object
    assert ref(old_run.output) == ref(keep_run.output)
    execution = ActivityExecution.objects.get(run_id=old_run.id)
    assert live_references() == {
        ref(old_run.arguments)["uri"],
        ref(execution.arguments)["uri"],
        ref(execution_results([execution])[execution.id])["uri"],
        ref(old_run.output)["uri"],
    }
    assert len(driver.objects) == 4
    # A run whose rendered output is unique to it.
    solo = start("tests.external.document", "ext-prune-solo", "u" * 10)
    inline.run()
    solo_run = WorkflowRun.objects.get(id=solo.run_id())
    solo_output = ref(solo_run.output)["uri"]
    solo_execution = ActivityExecution.objects.get(run_id=solo_run.id)
    solo_result = ref(execution_results([solo_execution])[solo_execution.id])["uri"]
    assert not envelope.is_external(solo_run.arguments)  # small payloads stay inline

    found = references_for_runs([old_run.id, solo_run.id])
    uris = {reference.uri for reference in found}
    assert solo_output in uris and ref(old_run.arguments)["uri"] in uris
    with database.atomic(), pytest.raises(RuntimeError, match="after"):
        delete_unreferenced(found)
    delete_runs([old_run.id, solo_run.id])
    assert delete_unreferenced(found) == 0  # written moments ago: inside the grace period
    assert delete_unreferenced(found, grace_seconds=0) == 2
    remaining = {driver.uri(key) for key in driver.objects}
    assert len(remaining) == 4
    assert solo_output not in remaining and solo_result not in remaining
    # The other run still reads every payload it shared with the pruned one.
    external.clear_cache()
    assert keep.refresh().output()["rendered"] == "s" * MIB
    assert envelope.decode(keep_run.arguments) == [shared]
    assert WorkflowFailure.objects.count() == 0
