"""``manage.py schedule_tick``, the ticker lock, fire-slot uniqueness and the Celery entry."""

from __future__ import annotations

import datetime as dt
import io
import json
import threading

import pytest
from django.core.management import call_command
from django.db import connections
from django.test import override_settings

from durable_workflow import clock
from durable_workflow.models import (
    ScheduleFire,
    WorkflowCommand,
    WorkflowInstance,
    WorkflowSchedule,
)
from durable_workflow.schedules import ScheduleManager, ticker
from durable_workflow.schedules.tasks import (
    SCHEDULE_TICK_TASK,
    schedule_beat_entry,
    schedule_tick,
)
from tests import isolation
from tests.conftest import require_redis

pytestmark = pytest.mark.django_db(transaction=True)

UTC = dt.UTC
NOON = dt.datetime(2026, 4, 10, 12, 0, tzinfo=UTC)


def make(schedule_id: str, cron: str = "0 * * * *", **options) -> None:
    options.setdefault("overlap_policy", "allow_all")
    ScheduleManager.create(
        schedule_id=schedule_id,
        workflow="tests.sleeper",
        cron_expression=cron,
        arguments=[60],
        **options,
    )


def tick_json(*args: str) -> dict:
    out = io.StringIO()
    call_command("schedule_tick", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_fires_what_is_due_once_and_reports_json():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("a")
    make("b", cron="30 * * * *")
    clock.freeze(NOON + dt.timedelta(seconds=5))
    report = tick_json()
    assert report["lock_acquired"] is True
    [row] = report["results"]
    assert row == {
        "schedule_id": "a",
        "namespace": "default",
        "outcome": "triggered",
        "instance_id": "schedule:a:20260410T120000Z",
        "run_id": row["run_id"],
        "reason": None,
        "occurrence_time": "2026-04-10T12:00:00.000000Z",
        "last_fired_at": "2026-04-10T12:00:05.000000Z",
        "next_fire_at": "2026-04-10T13:00:00.000000Z",
    }
    assert tick_json()["results"] == []
    assert WorkflowInstance.objects.count() == 1


def test_the_command_prints_a_readable_summary():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("a")
    clock.freeze(NOON)
    out = io.StringIO()
    call_command("schedule_tick", stdout=out)
    assert out.getvalue().splitlines() == [
        "a: triggered schedule:a:20260410T120000Z",
        "1 schedule action(s)",
    ]


def test_loop_mode_ticks_until_stopped(monkeypatch):
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("a")
    naps: list[float] = []

    def pause(self, stop, interval: float) -> bool:
        naps.append(interval)
        clock.advance(dt.timedelta(hours=1))
        return len(naps) == 3  # then stop, as SIGTERM would

    monkeypatch.setattr("durable_workflow.management.commands.schedule_tick.Command._pause", pause)
    out = io.StringIO()
    call_command("schedule_tick", "--loop", "--interval", "0.5", "--json", stdout=out)
    reports = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [len(r["results"]) for r in reports] == [0, 1, 1]
    assert naps == [0.5, 0.5, 0.5]


def test_a_tick_that_cannot_take_the_lock_does_nothing():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("a")
    clock.freeze(NOON)
    with ticker.tick_lock() as held:
        assert held
        assert tick_json() == {"lock_acquired": False, "results": []}
        out = io.StringIO()
        call_command("schedule_tick", stdout=out)
        assert "holds the lock" in out.getvalue()
    assert not WorkflowInstance.objects.exists()
    assert len(tick_json()["results"]) == 1  # released: the next tick does the work


def test_a_claimed_fire_slot_is_never_started_again():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("a")
    schedule = WorkflowSchedule.objects.get(schedule_id="a")
    ScheduleFire.objects.create(  # as if another ticker had claimed 12:00 already
        schedule=schedule,
        instance_id="schedule:a:20260410T120000Z",
        kind="tick",
        status="started",
        occurrence_time=NOON,
        created_at=NOON,
        updated_at=NOON,
    )
    clock.freeze(NOON)
    [row] = ScheduleManager.tick()
    assert row["outcome"] == "already_fired"
    assert row["next_fire_at"] == NOON + dt.timedelta(hours=1)
    assert not WorkflowInstance.objects.exists()
    assert ScheduleManager.describe("a").fires_count == 0


def test_one_broken_schedule_does_not_stop_the_others():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("broken")
    make("fine")
    WorkflowSchedule.objects.filter(schedule_id="broken").update(workflow_type="tests.gone")
    clock.freeze(NOON)
    rows = {row["schedule_id"]: row for row in ScheduleManager.tick()}
    assert rows["fine"]["outcome"] == "triggered"
    assert rows["broken"]["outcome"] == "failed"
    assert "tests.gone" in rows["broken"]["reason"]
    # Nothing of the broken one was written: it stays due and is retried next tick.
    assert ScheduleManager.describe("broken").next_fire_at == NOON
    assert not ScheduleFire.objects.filter(schedule__schedule_id="broken").exists()


def test_racing_threads_without_the_cache_lock_start_each_slot_once():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    for index in range(5):
        make(f"race-{index}")
    clock.freeze(NOON)
    ids = list(WorkflowSchedule.objects.values_list("id", flat=True))
    barrier = threading.Barrier(4)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def race() -> None:
        try:
            barrier.wait()
            for ulid in ids:  # what tick() does, minus the lock
                outcomes.extend(row.outcome for row in ticker._tick_schedule(ulid))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(outcomes) == ["triggered"] * 5
    assert WorkflowInstance.objects.count() == 5
    assert ScheduleFire.objects.count() == 5
    starts = WorkflowCommand.objects.filter(command_type="start", source="schedule")
    assert starts.count() == 5


def test_the_celery_task_and_its_beat_entry():
    clock.freeze(NOON - dt.timedelta(minutes=30))
    make("a")
    clock.freeze(NOON)
    assert schedule_tick.name == SCHEDULE_TICK_TASK == "durable_workflow.schedule_tick"
    assert schedule_tick() == {"lock_acquired": True, "outcomes": {"triggered": 1}}
    entry = schedule_beat_entry()["durable-workflow-schedule-tick"]
    assert entry["task"] == "durable_workflow.schedule_tick"
    assert entry["schedule"] == 10.0 and entry["options"] == {"expires": 20.0}


def test_the_django_redis_lock_admits_one_holder():
    require_redis(isolation.CACHE_REDIS_URL)
    caches = {"default": isolation.redis_cache()}
    with override_settings(CACHES=caches):
        from django.core.cache import cache

        assert hasattr(cache, "lock")  # a real Redis lock, not the add() fallback
        cache.delete(ticker.LOCK_KEY)
        with ticker.tick_lock() as first, ticker.tick_lock() as second:
            assert (first, second) == (True, False)
        with ticker.tick_lock() as again:
            assert again


def _lock_ttl_seconds(cache) -> float:
    """Seconds the ticker lock has left in Redis (as a ticker killed now would leave it)."""
    key = cache.make_key(ticker.LOCK_KEY)
    return cache.client.get_client().pttl(key) / 1000


def test_a_killed_tickers_lock_lets_another_ticker_in_within_seconds():
    """The reliability suite's schedules scenario: a ticker SIGKILLed inside a tick left a
    lock that kept every other ticker out for 300 s. A held lock lives a few seconds and
    is renewed while its tick runs, so a dead holder's lock is gone that soon after."""
    require_redis(isolation.CACHE_REDIS_URL)
    with override_settings(CACHES={"default": isolation.redis_cache()}):
        from django.core.cache import cache

        cache.delete(ticker.LOCK_KEY)
        with ticker.tick_lock() as held:
            assert held
            assert 0 < _lock_ttl_seconds(cache) <= 5  # what a killed holder leaves


def test_a_held_ticker_lock_is_renewed_while_its_tick_runs():
    """Renewal is driven by hand here (the renewing thread does the same every third of
    the lock's lifetime): a tick longer than the lifetime keeps its lock."""
    require_redis(isolation.CACHE_REDIS_URL)
    with override_settings(CACHES={"default": isolation.redis_cache()}):
        from django.core.cache import cache

        cache.delete(ticker.LOCK_KEY)
        with ticker.tick_lock() as held:
            assert held
            client, key = cache.client.get_client(), cache.make_key(ticker.LOCK_KEY)
            client.pexpire(key, 200)  # nearly expired
            renewed = []  # from another thread, as the renewing thread does it
            other = threading.Thread(target=lambda: renewed.append(ticker.renew_held_lock()))
            other.start()
            other.join()
            assert renewed == [True]
            assert _lock_ttl_seconds(cache) > 4
        assert not ticker.renew_held_lock()  # released: nothing to renew
        assert not client.exists(key)


def test_the_add_based_lock_is_renewed_and_released_too():
    clock.freeze(NOON)
    from django.core.cache import cache

    cache.delete(ticker.LOCK_KEY)
    with ticker.tick_lock() as held:
        assert held
        assert ticker.renew_held_lock()
        with ticker.tick_lock() as second:
            assert not second
    assert cache.get(ticker.LOCK_KEY) is None
    assert not ticker.renew_held_lock()


def test_the_renewing_thread_stops_with_the_tick():
    with ticker.tick_lock() as held:
        assert held
        assert any(t.name == ticker.RENEWER_THREAD for t in threading.enumerate())
    assert not any(t.name == ticker.RENEWER_THREAD for t in threading.enumerate())
