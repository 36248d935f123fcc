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

from durable_workflow.testing import export_history, freeze
from tests.testing.scenarios import SCENARIOS, FakeDriver

HISTORIES = pathlib.Path(__file__).parent / "histories"


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_record(workflow_fake, scenario):
    freeze(dt.datetime(2025, 1, 1, tzinfo=dt.UTC))  # stable timestamps in the files
    stub = scenario.run(FakeDriver(), f"golden-{scenario.name}")
    document = export_history(stub.run_id())
    path = HISTORIES / f"{scenario.name}.json"
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
