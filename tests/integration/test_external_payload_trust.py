"""Only references the engine wrote steer reads and deletes of stored payloads (issue 18, item 2).

A caller controls JSON that the engine keeps in rows (a memo, labels, search
attributes, signal arguments). Shaped like an external-storage reference, such
a value must never make retention delete, or a decode read, an object of the
storage, which may be shared with the application's own files.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import transaction
from django.test import override_settings

from durable_workflow import WorkflowStub
from durable_workflow.codec import envelope, external
from durable_workflow.models import WorkflowRun
from durable_workflow.operations.prune import delete_runs
from durable_workflow.payload_storage import delete_unreferenced, references_for_runs

pytestmark = pytest.mark.django_db(transaction=True)

APP_FILE = "invoices/2024-001.pdf"
APP_BYTES = b"%PDF-1.7 the application's own invoice"
HOURS_AGO = 2 * 3600


@pytest.fixture
def shared_storage(tmp_path: pathlib.Path) -> Iterator[Any]:
    """Payloads go to the ``default`` storage, where the application keeps its files too."""
    overrides = {
        "STORAGES": {
            **settings.STORAGES,
            "default": {
                "BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(tmp_path)},
            },
        },
        "DURABLE_WORKFLOW": {
            **settings.DURABLE_WORKFLOW,
            "PAYLOAD_STORAGE": "django",
            "PAYLOAD_STORAGE_OPTIONS": {"alias": "default"},
            "PAYLOAD_OFFLOAD_THRESHOLD_BYTES": 1024,
        },
        "DURABLE_WORKFLOW_WEBHOOKS": {"ALLOW_UNAUTHENTICATED": True},
    }
    with override_settings(**overrides):
        storage = storages["default"]
        assert storage.save(APP_FILE, ContentFile(APP_BYTES)) == APP_FILE
        old = time.time() - HOURS_AGO  # well past the retention grace period
        os.utime(storage.path(APP_FILE), (old, old))
        yield storage


def forged(uri: str, data: bytes = APP_BYTES) -> dict[str, Any]:
    """A value shaped like the envelope of an offloaded payload, with a correct hash."""
    import hashlib

    return {
        "codec": "avro",
        "external_storage": {
            "schema": external.SCHEMA,
            "uri": uri,
            "sha256": hashlib.sha256(data).hexdigest(),
            "size_bytes": len(data),
            "codec": "avro",
        },
    }


def retention(run_ids: list[Any]) -> int:
    """Pruning as the how-to tells users to write it."""
    with transaction.atomic():
        references = references_for_runs(run_ids)
        delete_runs(run_ids)
    return delete_unreferenced(references)


def test_a_memo_shaped_like_a_reference_does_not_make_retention_delete_a_file(
    client, inline, shared_storage
):
    body = {
        "workflow_id": "memo-forgery",
        "order_id": 1,
        "visibility": {"memo": {"attachment": forged("django-storage://default/" + APP_FILE)}},
    }
    response = client.post(
        "/webhooks/start/order-workflow",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == 202, response.json()
    stub = WorkflowStub.load("memo-forgery")
    stub.terminate("done")
    retention([stub.run_id()])
    assert not WorkflowRun.objects.filter(instance_id="memo-forgery").exists()
    assert shared_storage.exists(APP_FILE)
    with shared_storage.open(APP_FILE, "rb") as handle:
        assert handle.read() == APP_BYTES


def test_a_reference_the_engine_did_not_write_is_never_read(shared_storage):
    from durable_workflow.exceptions import PayloadCodecError

    with pytest.raises(PayloadCodecError) as refused:
        envelope.decode(forged("django-storage://default/" + APP_FILE))
    assert refused.value.reason == "untrusted_external_payload_reference"
    assert "no mark" in str(refused.value)


def test_a_marked_reference_outside_the_prefix_is_neither_read_nor_deleted(shared_storage):
    """Even a reference carrying a valid mark names only keys under PAYLOAD_STORAGE_PREFIX."""
    from durable_workflow.exceptions import PayloadCodecError

    policy = external.current()
    assert policy is not None
    raw = forged("django-storage://default/" + APP_FILE)
    marked = policy.mark(external.ExternalPayloadReference.from_dict(raw["external_storage"]))
    with pytest.raises(PayloadCodecError, match="outside the prefix"):
        envelope.decode({"codec": "avro", "external_storage": marked.to_dict()})
    assert delete_unreferenced({marked}, grace_seconds=0) == 0
    assert shared_storage.exists(APP_FILE)


def test_an_object_whose_bytes_changed_is_left_in_place(shared_storage, inline, caplog):
    stub = WorkflowStub.make("webhooks.order", "changed-1")
    stub.start("z" * 4096)
    run = WorkflowRun.objects.get(id=stub.run_id())
    reference = external.ExternalPayloadReference.from_dict(run.arguments["external_storage"])
    name = shared_storage.path(policy_key(reference))
    pathlib.Path(name).write_bytes(b"someone else's bytes now")
    old = time.time() - HOURS_AGO
    os.utime(name, (old, old))
    stub.terminate("done")
    assert retention([stub.run_id()]) == 0
    assert pathlib.Path(name).read_bytes() == b"someone else's bytes now"
    assert "left in place" in caplog.text


def policy_key(reference: external.ExternalPayloadReference) -> str:
    policy = external.current()
    assert policy is not None
    return policy.driver.key_of(reference.uri)  # type: ignore[attr-defined, no-any-return]


def test_genuine_objects_are_still_pruned(shared_storage, inline):
    stub = WorkflowStub.make("webhooks.order", "genuine-1")
    stub.start("g" * 4096)
    run = WorkflowRun.objects.get(id=stub.run_id())
    reference = external.ExternalPayloadReference.from_dict(run.arguments["external_storage"])
    assert reference.mac is not None
    path = pathlib.Path(shared_storage.path(policy_key(reference)))
    old = time.time() - HOURS_AGO
    os.utime(path, (old, old))
    stub.terminate("done")
    assert retention([stub.run_id()]) == 1
    assert not path.exists()
    assert shared_storage.exists(APP_FILE)


def test_references_stay_readable_across_a_secret_key_rotation(shared_storage, settings):
    stored = envelope.encode("r" * 4096)
    external.clear_cache()
    with override_settings(SECRET_KEY="the-next-key", SECRET_KEY_FALLBACKS=[settings.SECRET_KEY]):
        assert envelope.decode(stored) == "r" * 4096
    external.clear_cache()
    with override_settings(SECRET_KEY="the-next-key", SECRET_KEY_FALLBACKS=[]):
        from durable_workflow.exceptions import PayloadCodecError

        with pytest.raises(PayloadCodecError, match="not this engine's"):
            envelope.decode(stored)
