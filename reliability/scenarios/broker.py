"""Broker loss: Redis crashes (SIGKILL, restarted from its append-only file a few seconds
later) and, later, loses every message at once (FLUSHALL)."""

from __future__ import annotations

from reliability.lab import Context, Lab, Scenario
from reliability.load import Workload
from reliability.scenarios import faults


def workload(ctx: Context) -> Workload:
    return Workload(count=40 if ctx.quick else 200, spread_seconds=30 if ctx.quick else 100)


def inject(lab: Lab) -> None:
    rounds = 1 if lab.ctx.quick else 3
    for index in range(rounds):
        lab.until(8 + index * 30)
        faults.restart_redis(lab, down_seconds=5)
        lab.until(20 + index * 30)
        faults.flush_redis(lab)


SCENARIO = Scenario(
    name="broker",
    title="Redis crashed and restarted (5 s down); Redis flushed (every message lost)",
    workload=workload,
    inject=inject,
)
