"""A workflow task's outcomes are one enum, and the reference lists each of them."""

from __future__ import annotations

import pathlib
import re

from durable_workflow.executor import WorkflowTaskOutcome

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_an_outcome_is_its_name_wherever_a_string_was_expected():
    assert WorkflowTaskOutcome.COMPLETED == "completed"
    assert f"{WorkflowTaskOutcome.TIMED_OUT}" == "timed_out"  # metric labels, log lines


def test_the_reference_lists_every_workflow_task_outcome():
    page = (ROOT / "docs/reference/management-commands.md").read_text()
    [row] = [
        line for line in page.splitlines() if line.startswith("| `durable_workflow.workflow_task`")
    ]
    returns = row.split(" | ")[2]
    assert set(re.findall(r'`"([a-z_]+)"`', returns)) == {o.value for o in WorkflowTaskOutcome}


def test_the_executor_returns_no_bare_outcome_strings():
    source = (ROOT / "durable_workflow/executor/workflow_task.py").read_text()
    assert not re.findall(r'return "[a-z_]+"', source)
