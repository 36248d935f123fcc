"""Several ``schedule_tick`` processes racing on PostgreSQL and Redis: every slot starts once.

Half of the tickers share a django-redis lock; the other half keep the test
settings' process-local cache, so for them only the database guards the slots
(row locks and the unique (schedule, slot) constraint).
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from durable_workflow.models import (
    ScheduleFire,
    ScheduleHistoryEvent,
    WorkflowCommand,
    WorkflowInstance,
    WorkflowSchedule,
)
from durable_workflow.schedules import ScheduleManager
from tests import isolation
from tests.acceptance.conftest import ROOT, wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

SCHEDULES = 6
SLOTS = 5  # one a second, both bounds of the window included
TICKERS_PER_KIND = 3

REDIS_SETTINGS = f"""
from tests.settings import *  # noqa: F403

CACHES = {{"default": {isolation.redis_cache(isolation.LOCK_REDIS_URL)!r}}}
"""


def start_ticker(tmp_path: pathlib.Path, index: int, settings: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "DW_TEST_DB": "postgres",
        "DW_PG_NAME": connection.settings_dict["NAME"],
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
    }
    command = [sys.executable, "-m", "django", "schedule_tick", "--loop", "--interval", "0.05"]
    with (
        (tmp_path / f"ticker-{index}.out").open("wb") as out,
        (tmp_path / f"ticker-{index}.err").open("wb") as err,
    ):
        return subprocess.Popen(
            [*command, "--json"], cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True
        )


def _ticked(tmp_path: pathlib.Path, index: int) -> bool:
    return bool((tmp_path / f"ticker-{index}.out").read_bytes().strip())


def test_concurrent_tickers_start_every_slot_exactly_once(broker, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("the ticker race runs against PostgreSQL (DW_TEST_DB=postgres)")
    isolation.delete_keys(isolation.LOCK_REDIS_URL, isolation.token())
    (tmp_path / "race_settings.py").write_text(REDIS_SETTINGS)

    kinds = ["race_settings"] * TICKERS_PER_KIND + ["tests.settings"] * TICKERS_PER_KIND
    tickers = [start_ticker(tmp_path, i, kind) for i, kind in enumerate(kinds)]
    try:
        # Every schedule fires once a second inside a short window that opens only once every
        # ticker has ticked (however long the processes took to start), so each slot is
        # contended by all of them.
        wait_for(
            lambda: all(_ticked(tmp_path, index) for index in range(len(tickers))),
            timeout=120,
            message="a ticker never ticked",
        )
        opens = dt.datetime.fromtimestamp(math.ceil(time.time()) + 2, tz=dt.UTC)
        closes = opens + dt.timedelta(seconds=SLOTS - 1)
        for index in range(SCHEDULES):
            ScheduleManager.create_from_spec(
                schedule_id=f"race-{index}",
                spec={
                    "intervals": [{"every": "PT1S"}],
                    "start_at": opens.isoformat(),
                    "end_at": closes.isoformat(),
                },
                action={"workflow_type": "tests.sleeper", "input": [3600]},
                overlap_policy="allow_all",
            )
        wait_for(
            lambda: not WorkflowSchedule.objects.filter(next_fire_at__isnull=False).exists(),
            timeout=60,
            message="the schedules never reached the end of their window",
        )
    finally:
        for ticker in tickers:
            if ticker.poll() is None:
                os.killpg(ticker.pid, signal.SIGTERM)  # the loop stops between ticks
        codes = [ticker.wait(timeout=30) for ticker in tickers]
    errors = [(tmp_path / f"ticker-{i}.err").read_text() for i in range(len(tickers))]
    assert codes == [0] * len(tickers), errors

    reported = collections.Counter()
    for index in range(len(tickers)):
        for line in (tmp_path / f"ticker-{index}.out").read_text().splitlines():
            for row in json.loads(line)["results"]:
                reported[row["outcome"]] += 1
                assert row["outcome"] in ("triggered", "already_fired"), row

    started_total = 0
    for schedule in WorkflowSchedule.objects.all():
        fires = list(ScheduleFire.objects.filter(schedule=schedule).order_by("occurrence_time"))
        times = [fire.occurrence_time for fire in fires]
        assert len(times) == len(set(times)) >= 2
        assert all(opens <= t <= closes and t.microsecond == 0 for t in times)
        assert {fire.status for fire in fires} == {"started"}
        instances = WorkflowInstance.objects.filter(
            instance_id__startswith=f"schedule:{schedule.schedule_id}:"
        )
        assert sorted(i.instance_id for i in instances) == sorted(f.instance_id for f in fires)
        assert schedule.fires_count == len(fires)
        audit = ScheduleHistoryEvent.objects.filter(schedule_ulid=schedule.id).order_by("sequence")
        assert [e.sequence for e in audit] == list(range(1, len(audit) + 1))
        triggered = [e for e in audit if e.event_type == "ScheduleTriggered"]
        assert sorted(e.workflow_instance_id for e in triggered) == sorted(
            f.instance_id for f in fires
        )
        started_total += len(fires)

    # Each start was reported by exactly one ticker, and no start was ever attempted twice.
    assert reported["triggered"] == started_total
    starts = WorkflowCommand.objects.filter(command_type="start")
    assert starts.count() == started_total
    assert not starts.filter(status="rejected").exists()
