"""Re-record the golden histories (not collected by default; run it on purpose)::

    .venv/bin/python -m pytest tests/replay/record_goldens.py

Only re-record when a history *should* change (a new feature, a new event
field); a golden that stops replaying is otherwise exactly the regression
these files exist to catch. Review the diff of every re-recorded file.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib

import pytest

from durable_workflow.models import WorkflowRun
from durable_workflow.testing import export_history, freeze
from tests.testing.scenarios import SCENARIOS, FakeDriver

HISTORIES = pathlib.Path(__file__).parent / "histories"


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_record(workflow_fake, scenario):
    freeze(dt.datetime(2025, 1, 1, tzinfo=dt.UTC))  # stable timestamps in the files
    stub = scenario.run(FakeDriver(), f"golden-{scenario.name}")
    runs = list(WorkflowRun.objects.filter(instance_id=stub.id()).order_by("run_number"))
    for run in runs:  # continue-as-new: one file per run
        suffix = f".run-{run.run_number}" if len(runs) > 1 else ""
        document = export_history(run.id)
        path = HISTORIES / f"{scenario.name}{suffix}.json"
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
