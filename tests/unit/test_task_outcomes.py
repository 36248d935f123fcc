"""A task's outcomes are one enum per task type, and the reference lists each of them."""

from __future__ import annotations

import enum
import pathlib
import re

import pytest

from durable_workflow.executor import ActivityTaskOutcome, TimerTaskOutcome, WorkflowTaskOutcome

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_an_outcome_is_its_name_wherever_a_string_was_expected():
    assert WorkflowTaskOutcome.COMPLETED == "completed"
    assert f"{WorkflowTaskOutcome.TIMED_OUT}" == "timed_out"  # metric labels, log lines
    assert f"activity_{ActivityTaskOutcome.FAILED}" == "activity_failed"  # async completion


@pytest.mark.parametrize(
    ("task", "outcomes"),
    [
        ("workflow_task", WorkflowTaskOutcome),
        ("activity_task", ActivityTaskOutcome),
        ("timer_task", TimerTaskOutcome),
    ],
)
def test_the_reference_lists_every_outcome(task: str, outcomes: type[enum.StrEnum]):
    page = (ROOT / "docs/reference/management-commands.md").read_text()
    [row] = [line for line in page.splitlines() if line.startswith(f"| `durable_workflow.{task}`")]
    returns = row.split(" | ")[2]
    assert set(re.findall(r'`"([a-z_ ]+)"`', returns)) == {o.value for o in outcomes}


@pytest.mark.parametrize("module", ["workflow_task", "activity_task", "timer_task"])
def test_the_entry_modules_return_no_bare_outcome_strings(module: str):
    source = (ROOT / f"durable_workflow/executor/{module}.py").read_text()
    assert not re.findall(r'return "[a-z_ ]+"', source)
