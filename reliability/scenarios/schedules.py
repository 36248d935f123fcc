"""Schedules: three ``schedule_tick --loop`` processes tick every 0.5 s against three
every-second schedules (overlap ``allow_all``: each slot starts a run), and one ticker is
SIGKILLed now and then. No slot may start twice; slots missed and the longest gap between
fires are reported (the ticker lock of a killed ticker is only released by its timeout)."""

from __future__ import annotations

from typing import Any

from reliability.lab import Context, Lab, Scenario
from reliability.load import Workload

SCHEDULES = ("every-second-1", "every-second-2", "every-second-3")
TICKERS = ("ticker-1", "ticker-2", "ticker-3")
#: django-redis's key of the engine's ticker lock (durable_workflow.schedules.ticker).
LOCK_KEY = ":1:durable_workflow:schedule_tick"


def _seconds(ctx: Context) -> float:
    return 30 if ctx.quick else 120


def workload(ctx: Context) -> Workload:
    return Workload(count=10 if ctx.quick else 40, spread_seconds=_seconds(ctx) - 10)


def tickers(lab: Lab) -> None:
    for name in TICKERS:
        lab.add_command(name, ["schedule_tick", "--loop", "--interval", "0.5"])


def inject(lab: Lab) -> None:
    from durable_workflow.schedules import ScheduleManager

    for schedule_id in SCHEDULES:
        ScheduleManager.create_from_spec(
            schedule_id=schedule_id,
            spec={"intervals": [{"every": "PT1S"}]},
            action={"workflow_type": "chaos.tick", "input": [schedule_id]},
            overlap_policy="allow_all",
        )
    lab.until(_seconds(lab.ctx) / 4)
    unit = lab.supervisor.units[lab.rng.choice(TICKERS)]
    if lab.supervisor.kill(unit, whole_group=True):
        lab.fault("sigkill", f"schedule ticker {unit.name}")
    lab.until(_seconds(lab.ctx) / 2)
    _kill_all_mid_tick(lab)
    lab.until(_seconds(lab.ctx))
    for schedule_id in SCHEDULES:
        ScheduleManager.delete(schedule_id, reason="end of the scenario")
    lab.ctx.log("schedules deleted")


def _kill_all_mid_tick(lab: Lab) -> None:
    """The machine running every ticker dies while one of them is in a tick (it holds
    the ticker lock in Redis)."""
    client = lab.redis.client()
    client.select(1)  # the cache's database (reliability/config.py)
    for _ in range(500):
        if client.exists(LOCK_KEY):
            break
        lab.sleep(0.01)
    held = bool(client.exists(LOCK_KEY))
    for name in TICKERS:
        lab.supervisor.kill(lab.supervisor.units[name], whole_group=True)
    lab.fault("sigkill", f"all tickers at once ({'inside' if held else 'outside'} a tick)")


SLOTS = """
WITH fired AS (
    SELECT schedule_id, occurrence_time,
           extract(epoch FROM occurrence_time - lag(occurrence_time)
                   OVER (PARTITION BY schedule_id ORDER BY occurrence_time)) AS gap
    FROM durable_workflow_schedule_fire WHERE status = 'started'
)
SELECT s.schedule_id, count(f.occurrence_time), count(DISTINCT f.occurrence_time),
       extract(epoch FROM s.deleted_at - min(f.occurrence_time)),
       greatest(max(f.gap), extract(epoch FROM s.deleted_at - max(f.occurrence_time)))
FROM durable_workflow_schedule s LEFT JOIN fired f ON f.schedule_id = s.id
GROUP BY s.schedule_id, s.deleted_at ORDER BY s.schedule_id
"""

TWICE = """
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM durable_workflow_schedule_history_event
                         WHERE event_type = 'ScheduleTriggered'
                         GROUP BY workflow_instance_id HAVING count(*) > 1) a),
  (SELECT count(*) FROM durable_workflow_instance
   WHERE instance_id LIKE 'schedule:%%' AND run_count > 1)
"""


def figures(lab: Lab, conn: Any) -> dict[str, Any]:
    del lab
    per_schedule = {}
    for schedule_id, fires, slots, span, gap in conn.execute(SLOTS).fetchall():
        # Every whole second from the first fire to the deletion (the last one may race it).
        expected = int(float(span or 0)) if fires else 0
        per_schedule[schedule_id] = {
            "fires": fires,
            "slots_missed": max(0, expected - slots),
            "longest_gap_s": round(float(gap or 0), 1),
        }
    triggered_twice, instance_run_twice = conn.execute(TWICE).fetchone()
    ticks = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE status = 'completed') FROM durable_workflow_run "
        "WHERE workflow_type = 'chaos.tick'"
    ).fetchone()
    return {
        "schedules": per_schedule,
        "slot_fired_twice": triggered_twice + instance_run_twice,
        "scheduled_runs": {"total": ticks[0], "completed": ticks[1]},
    }


def judge(f: dict[str, Any]) -> list[str]:
    failures = []
    if f["slot_fired_twice"]:
        failures.append(f"{f['slot_fired_twice']} schedule slots fired twice")
    runs = f["scheduled_runs"]
    if runs["completed"] < runs["total"]:
        failures.append(f"{runs['total'] - runs['completed']} scheduled runs not completed")
    if not any(s["fires"] for s in f["schedules"].values()):
        failures.append("no schedule fired")
    return failures


def warn(f: dict[str, Any]) -> list[str]:
    missed = sum(s["slots_missed"] for s in f["schedules"].values())
    gap = max((s["longest_gap_s"] for s in f["schedules"].values()), default=0)
    return [f"{missed} schedule slots missed (longest gap {gap:.0f} s)"] if missed else []


SCENARIO = Scenario(
    name="schedules",
    title="3 schedule_tick --loop processes, 3 every-second schedules, a ticker SIGKILLed",
    workload=workload,
    inject=inject,
    extra_units=tickers,
    extra_checks=figures,
    judge=judge,
    warn=warn,
)
