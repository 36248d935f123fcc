"""docs/quickstart.md, followed word for word from an empty directory (issue 22).

``django-admin startproject``, the settings, the Celery app, a real ``celery worker``
on Redis and the workflow run to completion, with every output the page shows compared
to what a reader sees. The virtualenv and ``pip install`` lines are left to
``scripts/install_check.py`` (CI), which runs the same page on the built wheel.
"""

from __future__ import annotations

import pytest

from tests import isolation
from tests.conftest import require_redis
from tests.docs import quickstart


def test_the_quickstart_runs_from_top_to_bottom(tmp_path):
    require_redis()
    scratch = tmp_path / "project"
    scratch.mkdir()
    runner = quickstart.Quickstart(scratch, install=None, broker=isolation.BROKER_URL)
    try:
        runner.run()
    except AssertionError as exc:
        pytest.fail(f"{exc}\nworker log:\n{runner.worker_log()[-6000:]}")


def test_every_step_of_the_page_is_run():
    """The page keeps its shape: the steps this test relies on are still there."""
    codes = "".join(step.code for step in quickstart.steps())
    for expected in ("django-admin startproject", "startapp", "celery -A proj worker"):
        assert expected in codes
    assert any(step.expected for step in quickstart.steps())
