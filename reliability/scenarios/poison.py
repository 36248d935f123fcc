"""Poison: an activity and a workflow task that kill the worker running them, every
time. Each must reach its cap (the activity fails after ``ACTIVITY_MAX_LEASE_EXPIRIES``
lost leases; the workflow task is parked) while the rest of the workload completes.

Leases are shortened to 10 s here, and in --quick the caps lowered to 2 lost leases and 3
workflow task attempts (stated in the report), so the caps are reached in bounded time.
"""

from __future__ import annotations

from typing import Any

from reliability import ledger
from reliability.lab import Context, Lab, Scenario
from reliability.load import Workload
from reliability.workflows import PoisonActivity, PoisonWorkflow


def settings(ctx: Context) -> dict[str, Any]:
    short = {"ACTIVITY_LEASE_SECONDS": 10, "WORKFLOW_TASK_LEASE_SECONDS": 10}
    if ctx.quick:
        short |= {"ACTIVITY_MAX_LEASE_EXPIRIES": 2, "WORKFLOW_TASK_MAX_ATTEMPTS": 3}
    return short


CAP_STATES = ("capped", "parked")


def workload(ctx: Context) -> Workload:
    return Workload(count=20 if ctx.quick else 60, spread_seconds=20 if ctx.quick else 60)


def _state(instance_id: str) -> str:
    """``capped`` (closed), ``parked`` (open on a failed workflow task) or ``open``."""
    from durable_workflow import WorkflowStub

    stub = WorkflowStub.load(instance_id)
    if not stub.running():
        return "capped"
    return "parked" if stub.describe().parked else "open"


def inject(lab: Lab) -> None:
    from durable_workflow import WorkflowStub

    WorkflowStub.make(PoisonActivity, "poison-activity").start()
    WorkflowStub.make(PoisonWorkflow, "poison-workflow").start()
    lab.fault("poison", "one poison activity and one poison workflow task started")
    limit = 90 if lab.ctx.quick else 300
    reached: dict[str, float | None] = {"poison-activity": None, "poison-workflow": None}
    lab.notes["reached"] = reached
    while lab.elapsed() < limit and None in reached.values():
        for instance_id, at in reached.items():
            if at is None and _state(instance_id) in CAP_STATES:
                reached[instance_id] = lab.elapsed()
        lab.sleep(1)


def figures(lab: Lab, conn: Any) -> dict[str, Any]:
    """Where each poison run ended, and how many times it ran against its cap."""
    del conn
    from durable_workflow.conf import Settings

    def setting(name: str) -> int:
        return int(lab.engine_settings.get(name, getattr(Settings(), name)))

    reached = lab.notes.get("reached", {})
    states = {
        instance_id: {
            "state": _state(instance_id),
            "cap_reached_after_s": None if at is None else round(at, 1),
        }
        for instance_id, at in reached.items()
    }
    return {
        "poison": states,
        "poison_runs": {
            "activity_bodies": sum(ledger.counts(lab.ctx.run_dir, "poison-step").values()),
            "activity_cap": setting("ACTIVITY_MAX_LEASE_EXPIRIES") + 1,
            "workflow_crashes": sum(ledger.counts(lab.ctx.run_dir, "poison-task").values()),
            # docs/how-to/deploying-workers.md: the first attempt that dies leaves no trace.
            "workflow_cap": setting("WORKFLOW_TASK_MAX_ATTEMPTS") + 1,
        },
    }


def judge(f: dict[str, Any]) -> list[str]:
    failures = [
        f"{instance_id} never reached its cap (still {state['state']})"
        for instance_id, state in f["poison"].items()
        if state["state"] not in CAP_STATES
    ]
    if f["poison"].get("poison-workflow", {}).get("state") == "parked":
        # A parked run is what the doctor must name (durable_resume_paths, an error):
        # the intended outcome, so not a failure; its absence would be one.
        named = [
            check
            for check in f.get("doctor", {}).get("checks", [])
            if check["id"] == "durable_resume_paths" and "poison-workflow" in check["message"]
        ]
        if not named:
            failures.append("the doctor does not name the parked poison workflow")
    runs = f["poison_runs"]
    if runs["activity_bodies"] > runs["activity_cap"]:
        failures.append(
            f"poison activity ran {runs['activity_bodies']} times (cap {runs['activity_cap']})"
        )
    if runs["workflow_cap"] and runs["workflow_crashes"] > runs["workflow_cap"]:
        crashes, cap = runs["workflow_crashes"], runs["workflow_cap"]
        failures.append(f"poison workflow task crashed {crashes} times (cap {cap})")
    return failures


SCENARIO = Scenario(
    name="poison",
    title="a poison activity and a poison workflow task (each kills its worker every time)",
    workload=workload,
    inject=inject,
    engine_settings=settings,
    extra_checks=figures,
    judge=judge,
    expected_open=("chaos.poison-workflow",),
    expected_doctor=("durable_resume_paths",),
)
