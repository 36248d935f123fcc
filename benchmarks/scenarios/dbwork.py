"""Scenario 6: database work per activity step, at 10 and at 1,000 prior events.

One ``Sequence`` run is driven in this process with the engine's inline
dispatch backend on PostgreSQL: every workflow task and activity task is run by
calling the same executor functions a Celery worker calls, one at a time, with
counters around each:

* statements: every SQL statement Django sends (``connection.execute_wrapper``),
  split by kind; ``SAVEPOINT``/``RELEASE`` are counted apart from data queries;
* round trips: calls that reach the database driver (the engine sends the
  writes of a transaction that nobody reads back together, on PostgreSQL);
* transactions: outermost ``transaction.atomic`` blocks entered, plus
  statements run in autocommit mode (each is its own transaction);
* time: wall and CPU time of the task, to show how replay cost grows.

Then the same counters for whole *eager* steps (the default): one message runs
a workflow task, then the activity it leased to its own process, whose settle
transaction runs the workflow's next step and leases the next activity, and so
on; counted per step at the start of a run and after 1,000 events.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from benchmarks import stats
from benchmarks.scenarios.common import Context, row, unique

CHECKPOINTS = (10, 100, 500, 1_000)
STEPS = 400  # enough activities for > 1,000 events (3 events per step)
WINDOW = 5  # steps averaged for the timing at each checkpoint


@contextlib.contextmanager
def counting() -> Iterator[collections.Counter[str]]:
    from django.db import connection, transaction

    counter: collections.Counter[str] = collections.Counter()
    original_enter = transaction.Atomic.__enter__

    def enter(self: Any) -> Any:
        conn = transaction.get_connection(self.using)
        counter["transactions" if not conn.in_atomic_block else "nested_atomic"] += 1
        return original_enter(self)

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        verb = sql.lstrip().split(None, 1)[0].upper()
        if verb in ("SAVEPOINT", "RELEASE", "ROLLBACK"):
            counter["savepoint_statements"] += 1
        else:
            counter["queries"] += 1
            counter[f"q_{verb.lower()}"] += 1
            if " FOR UPDATE" in sql.upper():
                counter["q_select_for_update"] += 1
        if not connection.in_atomic_block:
            counter["transactions"] += 1
            counter["autocommit_statements"] += 1
        return execute(sql, params, many, context)

    from django.db.backends import utils

    original_execute = utils.CursorWrapper._execute

    def driver_call(self: Any, *args: Any) -> Any:
        counter["round_trips"] += 1
        return original_execute(self, *args)

    transaction.Atomic.__enter__ = enter  # type: ignore[method-assign]
    utils.CursorWrapper._execute = driver_call  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(wrapper):
            yield counter
    finally:
        transaction.Atomic.__enter__ = original_enter  # type: ignore[method-assign]
        utils.CursorWrapper._execute = original_execute  # type: ignore[method-assign]


def _measure(fn: Any, task_id: Any) -> dict[str, Any]:
    with counting() as counter:
        w0, c0 = time.perf_counter(), time.process_time()
        outcome = fn(task_id)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if outcome != "completed":
        raise RuntimeError(f"{fn.__name__} returned {outcome!r}")
    return {**counter, "wall_ms": wall * 1000, "cpu_ms": cpu * 1000}


def run(ctx: Context) -> dict[str, Any]:
    from django.conf import settings
    from django.test import override_settings

    from benchmarks.workflows import Sequence
    from durable_workflow import WorkflowStub, executor
    from durable_workflow.executor import dispatch
    from durable_workflow.models import Task, WorkflowRun
    from durable_workflow.testing.inline import InlineBackend

    previous = dispatch.set_backend(InlineBackend())
    # Each side is measured on its own: no eager activity in the workflow task, no
    # eager workflow task inside the activity task.
    separate = override_settings(
        DURABLE_WORKFLOW={
            **settings.DURABLE_WORKFLOW,
            "EAGER_WORKFLOW_TASKS": False,
            "EAGER_ACTIVITIES": False,
        }
    )
    separate.enable()
    steps: list[dict[str, Any]] = []
    try:
        instance_id = unique("dbwork")
        WorkflowStub.make(Sequence, instance_id).start(STEPS)
        run_row = WorkflowRun.objects.get(instance_id=instance_id)
        deadline = time.monotonic() + 300 * ctx.deadline_scale
        while True:
            prior = (
                WorkflowRun.objects.values_list("next_sequence", flat=True).get(id=run_row.id) - 1
            )
            if prior > CHECKPOINTS[-1] + 3 * (WINDOW + 1):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"only reached {prior} events")
            wf_task = Task.objects.get(run_id=run_row.id, task_type="workflow", status="ready")
            wf = _measure(executor.run_workflow_task, wf_task.id)
            act_task = Task.objects.get(run_id=run_row.id, task_type="activity", status="ready")
            act = _measure(executor.run_activity_task, act_task.id)
            steps.append({"prior_events": prior, "workflow_task": wf, "activity_task": act})
        separate.disable()
        separate = None
        eager_late = _eager_steps(run_row.id)
        instance_id = unique("dbwork-eager")
        WorkflowStub.make(Sequence, instance_id).start(STEPS)
        eager_early = _eager_steps(WorkflowRun.objects.get(instance_id=instance_id).id)
    finally:
        if separate is not None:
            separate.disable()
        dispatch.set_backend(previous)

    points: dict[str, Any] = {}
    for checkpoint in CHECKPOINTS:
        index = next(i for i, s in enumerate(steps) if s["prior_events"] >= checkpoint)
        window = steps[index : index + WINDOW]
        first = window[0]
        point: dict[str, Any] = {"prior_events": first["prior_events"]}
        for side in ("workflow_task", "activity_task"):
            counts = first[side]
            point[side] = {
                "queries": counts.get("queries", 0),
                "round_trips": counts.get("round_trips", 0),
                "transactions": counts.get("transactions", 0),
                "savepoint_statements": counts.get("savepoint_statements", 0),
                "by_kind": {k[2:]: v for k, v in sorted(counts.items()) if k.startswith("q_")},
                "wall_ms": round(stats.median(s[side]["wall_ms"] for s in window), 2),
                "cpu_ms": round(stats.median(s[side]["cpu_ms"] for s in window), 2),
                "queries_stable_in_window": len({s[side].get("queries") for s in window}) == 1,
            }
        points[str(checkpoint)] = point
        wf, act = point["workflow_task"], point["activity_task"]
        ctx.log(
            f"at {first['prior_events']} prior events: workflow task {wf['queries']} queries / "
            f"{wf['transactions']} tx / {wf['wall_ms']} ms, activity task {act['queries']} "
            f"queries / {act['transactions']} tx"
        )
    low, high = points[str(CHECKPOINTS[0])], points[str(CHECKPOINTS[-1])]
    constant = all(
        low[side]["queries"] == high[side]["queries"] for side in ("workflow_task", "activity_task")
    )
    max_tx = max(
        p[side]["transactions"]
        for p in points.values()
        for side in ("workflow_task", "activity_task")
    )
    rows = []
    for side, label in (("workflow_task", "workflow task"), ("activity_task", "activity task")):
        rows += [
            row(
                f"{label}: queries at {low['prior_events']} / {high['prior_events']} events",
                f"{low[side]['queries']} / {high[side]['queries']}",
            ),
            row(
                f"{label}: transactions at {low['prior_events']} / {high['prior_events']} events",
                f"{low[side]['transactions']} / {high[side]['transactions']}",
            ),
            row(
                f"{label}: wall time at {low['prior_events']} / {high['prior_events']} events",
                f"{low[side]['wall_ms']} / {high[side]['wall_ms']}",
                unit="ms",
            ),
        ]
    rows += [
        row(
            f"eager step: statements / round trips / transactions at {e['prior_events']} events",
            f"{e['queries']} / {e['round_trips']} / {e['transactions']}",
        )
        for e in (eager_early, eager_late)
    ]
    rows.append(
        row(
            f"eager step: wall time at {eager_early['prior_events']} / "
            f"{eager_late['prior_events']} events",
            f"{eager_early['wall_ms']} / {eager_late['wall_ms']}",
            unit="ms",
        )
    )
    return {
        "status": "ok",
        "points": points,
        "eager_steps": {"early": eager_early, "late": eager_late},
        "queries_constant": constant,
        "max_transactions_per_task": max_tx,
        "curve": [
            {
                "prior_events": s["prior_events"],
                "workflow_queries": s["workflow_task"].get("queries"),
                "workflow_wall_ms": round(s["workflow_task"]["wall_ms"], 2),
                "workflow_cpu_ms": round(s["workflow_task"]["cpu_ms"], 2),
                "activity_queries": s["activity_task"].get("queries"),
                "activity_wall_ms": round(s["activity_task"]["wall_ms"], 2),
            }
            for s in steps[:: max(1, len(steps) // 40)]
        ],
        "rows": rows,
    }


EAGER_STEPS = 10


class _Unsent:
    """A dispatch backend that publishes nothing (the next message runs the task)."""

    def send(self, task: Any, countdown: float | None) -> None:
        pass


def _eager_steps(run_id: Any) -> dict[str, Any]:
    """Per-step counters of one message chaining ``EAGER_STEPS`` whole steps."""
    from django.conf import settings
    from django.test import override_settings

    from durable_workflow import executor
    from durable_workflow.executor import dispatch
    from durable_workflow.models import Task, WorkflowRun

    def events() -> int:
        return WorkflowRun.objects.values_list("next_sequence", flat=True).get(id=run_id) - 1

    # A message: the workflow task, then EAGER_STEPS activities, each settled in the
    # transaction that runs the workflow's next step (the last one publishes it).
    engine = {
        **settings.DURABLE_WORKFLOW,
        "EAGER_WORKFLOW_TASKS": True,
        "EAGER_ACTIVITIES": True,
        "EAGER_CHAIN_LIMIT": EAGER_STEPS,
    }
    # A worker's view: the inline backend would stand for the testing kit, which
    # publishes every activity; here a published task just waits for the next message.
    previous = dispatch.set_backend(_Unsent())
    with override_settings(DURABLE_WORKFLOW=engine):
        task = Task.objects.get(run_id=run_id, task_type="workflow", status="ready")
        executor.run_workflow_task(task.id)  # warm the body
        prior = events()
        task = Task.objects.get(run_id=run_id, task_type="workflow", status="ready")
        measured = _measure(executor.run_workflow_task, task.id)
    dispatch.set_backend(previous)
    steps = (events() - prior) / 3
    if steps != EAGER_STEPS:
        raise RuntimeError(f"an eager message ran {steps} steps, expected {EAGER_STEPS}")
    return {
        "prior_events": prior,
        **{
            key: round(measured.get(key, 0) / steps, 2)
            for key in ("queries", "round_trips", "transactions", "wall_ms", "cpu_ms")
        },
    }
