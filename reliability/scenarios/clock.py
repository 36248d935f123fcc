"""Clock skew: one worker's machine clock runs ahead and one behind (faked in-process with
``durable_workflow.clock.skew_system_clock``), the repair pass also runs as a Celery beat
task on whichever worker takes it. Timers must not fire early and leases must not be taken
from attempts that still hold them, judged in the database server's time."""

from __future__ import annotations

from reliability.lab import Context, Lab, Scenario
from reliability.load import Shape, Workload


def _seconds(ctx: Context) -> float:
    return 15 if ctx.quick else 90


def workload(ctx: Context) -> Workload:
    # Timers longer than the skew, and a heartbeating activity, so both can go wrong; few
    # steps, since every step may wait for a skewed clock.
    shape = Shape(steps=2, timer_seconds=12, fan=2, child=True, slow_seconds=6)
    return Workload(count=20 if ctx.quick else 120, spread_seconds=_seconds(ctx), shape=shape)


def offsets(ctx: Context) -> dict[str, float]:
    return {"solo-ahead": ctx.skew_seconds, "solo-behind": -ctx.skew_seconds}


def beat(lab: Lab) -> None:
    schedule = lab.ctx.run_dir / "celerybeat-schedule"
    lab.add_program(
        "beat",
        [
            "-m",
            "celery",
            "-A",
            "reliability.celery_app",
            "beat",
            "--loglevel=WARNING",
            "--schedule",
            str(schedule),
        ],
        DW_CHAOS_BEAT="1",
    )


def inject(lab: Lab) -> None:
    skew = lab.ctx.skew_seconds
    lab.fault("clock-skew", f"solo-ahead +{skew:.0f} s, solo-behind -{skew:.0f} s (whole run)")
    lab.until(_seconds(lab.ctx))


SCENARIO = Scenario(
    name="clock",
    title="a worker's clock ahead and one behind (±skew), repair also run by Celery beat",
    workload=workload,
    inject=inject,
    workers=lambda ctx: [
        ("solo-ahead", "solo", None),
        ("solo-behind", "solo", None),
        ("pre", "prefork", 2),
    ],
    clock_offsets=offsets,
    extra_units=beat,
)
