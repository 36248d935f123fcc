"""Encrypted payloads through a real Celery worker (PostgreSQL): the worker process
encrypts what it writes and decrypts what it reads, with keys from its own settings."""

from __future__ import annotations

import base64
import json
import os

import pytest
from django.conf import settings
from django.db.models import TextField
from django.db.models.functions import Cast
from django.test import override_settings

from durable_workflow import WorkflowStub
from durable_workflow.codec import rekey
from durable_workflow.models import ActivityExecution, HistoryEvent, WorkflowRun
from tests.testing.test_fake_vs_real import WorkerDriver

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

SECRET = "patient-7781-diagnosis"


def test_a_real_worker_round_trips_encrypted_payloads(start_worker):
    codecs = {
        "PAYLOAD_CODECS": ["zlib", "aes-gcm"],
        "PAYLOAD_ENCRYPTION_KEYS": {"w1": base64.b64encode(os.urandom(32)).decode()},
        "PAYLOAD_ENCRYPTION_KEY_ID": "w1",
    }
    with override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, **codecs}):
        worker = start_worker(beat=False, env={"DW_EXTRA_SETTINGS_JSON": json.dumps(codecs)})
        driver = WorkerDriver(worker)
        stub = WorkflowStub.make("tests.sequential", "enc-worker-1")
        stub.start(SECRET)
        driver.settle()
        assert stub.result(timeout=60) == [f"hello {SECRET}", 3]

        run = WorkflowRun.objects.get(id=stub.run_id())
        # An activity's result is kept by its ActivityCompleted event only.
        assert not ActivityExecution.objects.filter(run_id=run.id, result__isnull=False).exists()
        completions = HistoryEvent.objects.filter(run_id=run.id, event_type="ActivityCompleted")
        results = list(completions.values_list("payload__result", flat=True))
        stored = [
            *completions.annotate(text=Cast("payload", TextField())).values_list("text", flat=True),
            WorkflowRun.objects.filter(id=run.id)
            .annotate(text=Cast("output", TextField()))
            .values_list("text", flat=True)
            .get(),
        ]
        assert len(stored) == 3
        assert all(SECRET not in text for text in stored)
        # The worker wrote these (the activities' results and the run's output): its key id.
        assert rekey.key_id(run.output) == "w1"
        assert len(results) == 2 and all(rekey.key_id(result) == "w1" for result in results)
