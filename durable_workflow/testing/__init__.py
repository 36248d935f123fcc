"""Helpers for testing code that uses durable workflows.

``WorkflowStub.fake()`` / ``.mock()`` / ``.assert_*()`` live on the stub; this
package adds time travel, history replay and a ``unittest`` mixin::

    from durable_workflow.testing import travel, freeze, Replayer, export_history

Names load on first use, so importing this package (the pytest plugin does)
never touches Django models before Django is set up.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "travel": "durable_workflow.testing.timetravel",
    "travel_to": "durable_workflow.testing.timetravel",
    "freeze": "durable_workflow.testing.timetravel",
    "ClockChange": "durable_workflow.testing.timetravel",
    "Replayer": "durable_workflow.testing.replayer",
    "ReplayResult": "durable_workflow.testing.replayer",
    "export_history": "durable_workflow.testing.replayer",
    "ActivityFakeContext": "durable_workflow.testing.fake",
    "LogicError": "durable_workflow.testing.fake",
    "WorkflowFake": "durable_workflow.testing.fake",
    "WorkflowTestCase": "durable_workflow.testing.testcase",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'durable_workflow.testing' has no attribute {name!r}")
