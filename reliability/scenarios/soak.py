"""The soak (not in --quick): 10,000 workflows over 15 minutes while random faults hit
(worker SIGKILLs, Redis crashes and flushes, PostgreSQL crashes, killed connections),
with every worker process's RSS sampled."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from benchmarks.workers import rss_kb
from reliability.lab import Context, Lab, Scenario
from reliability.load import Shape, Workload
from reliability.scenarios import faults

#: Lighter than the other scenarios' orders so 10,000 fit in 15 minutes on small
#: machines; every tenth also has a child workflow and a wider fan-out.
LIGHT = Shape(steps=1, timer_seconds=1, fan=2, child=False)
FULL = Shape(steps=2, timer_seconds=2, fan=4, child=True)


def workload(ctx: Context) -> Workload:
    return Workload(
        count=ctx.soak_workflows,
        spread_seconds=ctx.soak_seconds - 60,
        shape_of=lambda n: FULL if n % 10 == 0 else LIGHT,
        prefix="soak",
    )


FAULTS = (
    (0.55, faults.kill_worker),
    (0.15, lambda lab: faults.terminate_worker_connections(lab)),
    (0.1, lambda lab: faults.restart_redis(lab, down_seconds=3)),
    (0.1, faults.flush_redis),
    (0.1, lambda lab: faults.crash_postgres(lab, down_seconds=3)),
)


def inject(lab: Lab) -> None:
    """Random faults; RSS is sampled from here until the checks (through the drain)."""
    samples: list[dict[str, Any]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(lab, samples, stop), daemon=True)
    lab.notes.update(rss=samples, stop_sampling=stop)
    sampler.start()
    while lab.elapsed() < lab.ctx.soak_seconds - 60:
        lab.sleep(lab.rng.uniform(15, 45))
        pick = lab.rng.random()
        for weight, fault in FAULTS:
            pick -= weight
            if pick <= 0:
                fault(lab)
                break


def _sample(lab: Lab, samples: list[dict[str, Any]], stop: threading.Event) -> None:
    while not stop.wait(10):
        for unit in lab.supervisor.workers():
            for pid in unit.pids():
                # A process may die between the listing and the read.
                with contextlib.suppress(OSError, RuntimeError):
                    kb = rss_kb(pid)
                    samples.append(
                        {"t": round(lab.elapsed()), "unit": unit.name, "pid": pid, "kb": kb}
                    )


def figures(lab: Lab, conn: Any) -> dict[str, Any]:
    del conn
    if "stop_sampling" in lab.notes:
        lab.notes["stop_sampling"].set()
    per_pid: dict[int, list[dict[str, Any]]] = {}
    for sample in lab.notes.get("rss", []):
        per_pid.setdefault(sample["pid"], []).append(sample)
    # Growth of the longest-lived processes: first and last sample of each.
    lived = sorted(per_pid.values(), key=lambda s: s[-1]["t"] - s[0]["t"], reverse=True)[:6]
    return {
        "rss": {
            "samples": len(lab.notes.get("rss", [])),
            "max_mb": round(max((s["kb"] for s in lab.notes.get("rss", [])), default=0) / 1024, 1),
            "longest_lived": [
                {
                    "unit": s[0]["unit"],
                    "pid": s[0]["pid"],
                    "seconds": s[-1]["t"] - s[0]["t"],
                    "first_mb": round(s[0]["kb"] / 1024, 1),
                    "last_mb": round(s[-1]["kb"] / 1024, 1),
                    "max_mb": round(max(x["kb"] for x in s) / 1024, 1),
                }
                for s in lived
            ],
        }
    }


SCENARIO = Scenario(
    name="soak",
    title="10,000 workflows over 15 min, a random fault every 15-45 s, worker RSS sampled",
    workload=workload,
    inject=inject,
    extra_checks=figures,
    drain_limit=900,
    in_quick=False,
)
