"""Without the ``otel`` extra, tracing says what to install; nothing else needs it."""

from __future__ import annotations

import importlib
import os
import pathlib
import subprocess
import sys

import pytest

from durable_workflow import interceptors
from durable_workflow.exceptions import ConfigurationError

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE = "durable_workflow.contrib.opentelemetry"


@pytest.fixture
def without_opentelemetry(monkeypatch):
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # an import of it fails
    monkeypatch.delitem(sys.modules, MODULE, raising=False)


def test_importing_it_names_the_extra(without_opentelemetry):
    with pytest.raises(ImportError, match=r"pip install 'durable-workflow\[otel\]'"):
        importlib.import_module(MODULE)


def test_configuring_it_names_the_extra(without_opentelemetry):
    with pytest.raises(ConfigurationError, match=r"durable-workflow\[otel\]"):
        interceptors.load([f"{MODULE}.TracingInterceptor"])


def test_nothing_imports_opentelemetry_unless_configured():
    code = (
        "import sys, django; django.setup(); "
        "import durable_workflow.executor.workflow_task, durable_workflow.executor.activity_task; "
        "import durable_workflow.client; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')]"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
