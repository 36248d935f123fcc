"""Worker SIGKILLs: every few seconds one worker process dies (a solo worker, a prefork
pool process, or a prefork worker's main process); the supervisor replaces it."""

from __future__ import annotations

from reliability.lab import Context, Lab, Scenario
from reliability.load import Shape, Workload
from reliability.scenarios import faults


def _seconds(ctx: Context) -> float:
    return 30 if ctx.quick else 120


#: Every tenth order starts with a 35-s activity that never heartbeats: longer than the
#: default lease (30 s), so only the engine keeping the lease of a live process saves it.
SILENT = Shape(slow_seconds=35, slow_heartbeats=False)


def workload(ctx: Context) -> Workload:
    return Workload(
        count=40 if ctx.quick else 200,
        spread_seconds=_seconds(ctx) - 5,
        shape_of=lambda n: SILENT if n % 10 == 5 else Shape(),
    )


def inject(lab: Lab) -> None:
    lab.sleep(3)
    while lab.elapsed() < _seconds(lab.ctx):
        faults.kill_worker(lab)
        lab.sleep(lab.rng.uniform(3, 6))


SCENARIO = Scenario(
    name="kill",
    title="worker SIGKILL every 3-6 s (main processes and prefork pool processes); "
    "every tenth order runs a silent 35-s activity",
    workload=workload,
    inject=inject,
)
