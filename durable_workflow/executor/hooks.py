"""Seams the testing kit uses to replace activity and workflow code in fake mode.

Production code never sets these. ``activity_mocks`` maps an activity type key
to a replacement: a callable ``(context, *args) -> result`` or a plain value.
``workflow_mocks`` maps a workflow type key to a subclass of the workflow whose
``handle()`` stands in for the real one (its signals, queries and updates stay).
"""

from __future__ import annotations

from typing import Any

from durable_workflow import registry

activity_mocks: dict[str, Any] = {}
workflow_mocks: dict[str, type] = {}


def workflow_class(type_key: str) -> type:
    """The class that runs workflows of ``type_key``: a mock's, else the registered one."""
    mocked = workflow_mocks.get(type_key)
    return mocked if mocked is not None else registry.workflow_class(type_key)
