"""Database faults: PostgreSQL crashes (``pg_ctl stop -m immediate``) and restarts while
work is in flight; then the workers' connections are killed again and again
(``pg_terminate_backend``)."""

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
        faults.crash_postgres(lab, down_seconds=5)
        lab.until(18 + index * 30)
        for _ in range(4):
            faults.terminate_worker_connections(lab)
            lab.sleep(2)


SCENARIO = Scenario(
    name="database",
    title="PostgreSQL crash (stop -m immediate, 5 s down); pg_terminate_backend of the "
    "workers' connections, 4 times 2 s apart",
    workload=workload,
    inject=inject,
)
