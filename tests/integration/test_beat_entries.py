"""``manage.py check`` and the doctor say when Celery beat has no entry for the repair
pass, or none for the schedule tick while schedules exist."""

from __future__ import annotations

import pytest

from durable_workflow.checks import check_beat_entries, check_beat_entries_for_schedules
from durable_workflow.schedules import ScheduleManager
from durable_workflow.schedules.tasks import schedule_beat_entry
from durable_workflow.transport.celery import beat_schedule
from tests.celery_app import app
from tests.integration.test_doctor import check, doctor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def entries():
    """The tests' app's beat schedule, restored afterwards; set it to what a test needs."""
    saved = app.conf.beat_schedule
    yield lambda *parts: setattr(
        app.conf, "beat_schedule", {k: v for p in parts for k, v in p.items()}
    )
    app.conf.beat_schedule = saved


def _ids(messages):
    return [m.id for m in messages]


def test_the_repair_entry_is_enough_without_schedules(entries):
    entries(beat_schedule())
    assert check_beat_entries() == []
    assert check_beat_entries_for_schedules() == []
    assert check(doctor(), "beat_entries")["status"] == "ok"


def test_a_missing_repair_entry_is_reported(entries):
    entries()
    assert _ids(check_beat_entries()) == ["durable_workflow.W031"]
    assert "workflow_repair --loop" in check_beat_entries()[0].hint
    finding = check(doctor(), "beat_entries")
    assert finding["status"] == "warning"
    assert finding["details"]["missing"] == ["durable_workflow.repair"]


def test_a_missing_tick_entry_is_reported_once_schedules_exist(entries):
    entries(beat_schedule())
    ScheduleManager.create(
        schedule_id="nightly",
        workflow="tests.sequential",
        cron_expression="0 2 * * *",
        arguments=["ada"],
    )
    assert check_beat_entries() == []  # without the database nothing can tell
    assert _ids(check_beat_entries_for_schedules()) == ["durable_workflow.W032"]
    finding = check(doctor(), "beat_entries")
    assert finding["details"]["missing"] == ["durable_workflow.schedule_tick"]
    assert "schedules never fire" in finding["message"]
    entries(beat_schedule(), schedule_beat_entry())
    assert check_beat_entries_for_schedules() == []
    assert check(doctor(), "beat_entries")["status"] == "ok"


def test_entries_added_in_on_after_configure_are_seen(tmp_path):
    """The documented place for them (proj/celery.py); reading the configuration runs the
    hook, in a fresh process with the schedules package imported before Django."""
    import subprocess
    import sys
    import textwrap

    (tmp_path / "beatproj.py").write_text(
        textwrap.dedent("""
        from celery import Celery
        from durable_workflow.schedules.tasks import schedule_beat_entry

        app = Celery("beatproj")

        @app.on_after_configure.connect
        def add_entries(sender, **kwargs):
            from durable_workflow.transport.celery import beat_schedule

            sender.conf.beat_schedule = {**beat_schedule(), **schedule_beat_entry()}
    """)
    )
    script = textwrap.dedent("""
        import django
        django.setup()
        from django.test.utils import override_settings
        from django.conf import settings
        from durable_workflow.operations import beat
        config = {**settings.DURABLE_WORKFLOW, "CELERY_APP": "beatproj.app"}
        with override_settings(DURABLE_WORKFLOW=config):
            print(sorted(beat.static_tasks()[0]))
    """)
    import os

    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{os.getcwd()}"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['durable_workflow.repair', 'durable_workflow.schedule_tick']"
