"""The testing kit's public names, and a plugin that stays light until used."""

from __future__ import annotations

import subprocess
import sys

import durable_workflow.testing as testing
from durable_workflow import WorkflowStub

KIT_API = {
    "ActivityFakeContext",
    "ClockChange",
    "LogicError",
    "ReplayResult",
    "Replayer",
    "WorkflowFake",
    "WorkflowTestCase",
    "export_history",
    "freeze",
    "travel",
    "travel_to",
}

STUB_KIT = {
    "fake",
    "restore",
    "is_fake",
    "mock",
    "run_ready_tasks",
    "assert_dispatched",
    "assert_dispatched_times",
    "assert_not_dispatched",
    "assert_nothing_dispatched",
    "assert_signal_sent",
    "assert_signal_sent_times",
    "assert_signal_not_sent",
    "assert_update_sent",
    "assert_update_sent_times",
    "assert_update_not_sent",
}


def test_public_names_are_frozen():
    assert set(testing.__all__) == KIT_API
    for name in KIT_API:
        assert getattr(testing, name) is not None


def test_the_stub_carries_the_kit():
    for name in STUB_KIT:
        assert callable(getattr(WorkflowStub, name)), name


def test_wrapped_client_methods_keep_their_names_and_docs():
    assert WorkflowStub.attempt_start.__name__ == "attempt_start"
    assert WorkflowStub.attempt_start.__doc__
    assert hasattr(WorkflowStub.attempt_start, "__wrapped__")


def test_the_plugin_imports_no_django_models():
    code = (
        "import sys; import durable_workflow.testing.pytest_plugin; "
        "import durable_workflow.testing as t; "
        "assert 'durable_workflow.models' not in sys.modules, 'models imported'; "
        "assert 'django.db' not in sys.modules, 'django.db imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
