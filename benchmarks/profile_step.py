#!/usr/bin/env python
"""Where one queued activity step spends its time (workflow task + activity task).

Runs a ``Sequence`` workflow in this process with the inline dispatch backend
on the benchmark's PostgreSQL database (``dw_bench``, created and dropped here:
do not run it while ``run.py`` runs). Two passes over the same kind of steps:

1. a split of each task's wall time: SQL execution (every statement, timed in
   ``connection.execute_wrapper``), commits, and the engine phases that matter
   (history load, replay, persistence, activity claim/settle), the rest being
   ORM and Python overhead;
2. cProfile of the executor calls: the hottest functions by own time, and the
   ``durable_workflow`` functions by cumulative time. (Cumulative times of
   functions that run inside workflow greenlets are unreliable: cProfile
   charges a suspended greenlet's wait to the helper that switched away.)

    python benchmarks/profile_step.py [--steps 100] [--skip 0] [--top 20]

``--skip`` first runs that many steps unprofiled (to look at a long history).
``--eager`` profiles the path the ``sequential`` scenario measures instead: one
message chaining ``--steps`` whole steps (activity, then the workflow task it
wakes, in one transaction), timed once without and once with cProfile.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pathlib
import pstats
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--skip", type=int, default=0)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument(
        "--eager",
        action="store_true",
        help="profile eager steps instead (the default path: one message chains them)",
    )
    args = parser.parse_args()

    from benchmarks import config, services

    services.check_services()
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    services.create_database(config.PG_DB)
    import django

    django.setup()
    services.migrate()
    try:
        run(args)
    finally:
        from django.db import connections

        connections.close_all()
        services.drop_database(config.PG_DB)
    return 0


class Driver:
    """One run, its next ready task of each kind, executed through the executor."""

    def __init__(self, steps: int, name: str) -> None:
        from benchmarks.workflows import Sequence
        from durable_workflow import WorkflowStub
        from durable_workflow.models import WorkflowRun

        WorkflowStub.make(Sequence, name).start(steps)
        self.run_id = WorkflowRun.objects.get(instance__instance_id=name).id

    def next_task(self, kind: str) -> Any:
        from durable_workflow.models import Task

        return Task.objects.get(run_id=self.run_id, task_type=kind, status="ready").id

    def events(self) -> int:
        from durable_workflow.models import WorkflowRun

        return WorkflowRun.objects.values_list("next_sequence", flat=True).get(id=self.run_id) - 1


def _wrap(owner: Any, name: str, label: str, acc: dict[str, float]) -> None:
    original = getattr(owner, name, None)
    if original is None:
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            acc[label] += time.perf_counter() - started

    setattr(owner, name, timed)


def split(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.db.backends.base.base import BaseDatabaseWrapper

    from durable_workflow import executor
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.executor import activity_task, feeding, settlement
    from durable_workflow.store import history

    phases: dict[str, float] = collections.defaultdict(float)
    _wrap(BaseDatabaseWrapper, "commit", "commit", phases)
    _wrap(history, "load_history", "workflow: load_history", phases)
    _wrap(WorkflowRuntime, "feed", "workflow: runtime.feed (replay)", phases)
    _wrap(WorkflowRuntime, "dispose", "workflow: runtime.dispose", phases)
    _wrap(feeding, "persist", "workflow: persist new commands", phases)
    _wrap(activity_task, "_claim", "activity: claim transaction", phases)
    _wrap(activity_task, "_invoke", "activity: user code", phases)
    _wrap(settlement, "settle", "activity: settle transaction", phases)
    _wrap(settlement, "settle_results", "activity: settle transaction", phases)

    driver = Driver(args.skip + args.steps + 1, "split")
    for _ in range(args.skip):
        executor.run_workflow_task(driver.next_task("workflow"))
        executor.run_activity_task(driver.next_task("activity"))
    phases.clear()
    wall: dict[str, float] = collections.defaultdict(float)
    sql: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    start_events = driver.events()
    for _ in range(args.steps):
        for kind, fn in (
            ("workflow", executor.run_workflow_task),
            ("activity", executor.run_activity_task),
        ):
            task_id = driver.next_task(kind)

            def timer(execute, statement, params, many, context, kind=kind):  # type: ignore[no-untyped-def]
                started = time.perf_counter()
                try:
                    return execute(statement, params, many, context)
                finally:
                    sql[kind] += time.perf_counter() - started
                    count[kind] += 1

            with connection.execute_wrapper(timer):
                started = time.perf_counter()
                fn(task_id)
                wall[kind] += time.perf_counter() - started
    n = args.steps
    print(f"history {start_events} -> {driver.events()} events over {n} steps\n")
    print("per step, milliseconds (no profiler attached)")
    for kind in ("workflow", "activity"):
        print(
            f"  {kind} task: {wall[kind] / n * 1000:6.2f} wall, {sql[kind] / n * 1000:5.2f} in "
            f"{count[kind] / n:.0f} SQL statements"
        )
    print(f"  both: {(wall['workflow'] + wall['activity']) / n * 1000:6.2f}")
    print("  phases (include their own SQL):")
    for label, seconds in sorted(phases.items(), key=lambda item: -item[1]):
        print(f"    {label:34s} {seconds / n * 1000:6.2f}")


class _Unsent:
    """Publishes nothing: a task left for a message stays ready for the next call."""

    def send(self, task: Any, countdown: float | None) -> None:
        pass


def eager(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.db.backends import utils
    from django.test import override_settings

    from durable_workflow import executor
    from durable_workflow.executor import dispatch

    dispatch.set_backend(_Unsent())
    engine = {**settings.DURABLE_WORKFLOW, "EAGER_CHAIN_LIMIT": args.steps}
    waits = {"seconds": 0.0, "calls": 0}
    original = utils.CursorWrapper._execute

    def timed(self: Any, *a: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, *a)
        finally:
            waits["seconds"] += time.perf_counter() - started
            waits["calls"] += 1

    for label, prof in (("timed", None), ("cProfile", cProfile.Profile())):
        driver = Driver(args.skip + args.steps + 4, f"eager-{label}-{time.time_ns()}")
        warm = {**engine, "EAGER_CHAIN_LIMIT": max(2, args.skip)}
        with override_settings(DURABLE_WORKFLOW=warm):  # warm the body (and --skip steps)
            executor.run_workflow_task(driver.next_task("workflow"))
        with override_settings(DURABLE_WORKFLOW=engine):
            before, task_id = driver.events(), driver.next_task("workflow")
            waits.update(seconds=0.0, calls=0)
            utils.CursorWrapper._execute = timed  # type: ignore[method-assign]
            wall = time.perf_counter()
            try:
                if prof is None:
                    executor.run_workflow_task(task_id)
                else:
                    prof.runcall(executor.run_workflow_task, task_id)
            finally:
                wall = time.perf_counter() - wall
                utils.CursorWrapper._execute = original  # type: ignore[method-assign]
            steps = (driver.events() - before) / 3
            print(
                f"eager, {label}: {steps:.0f} steps after {before} events, "
                f"{wall / steps * 1000:.2f} ms per step, of which "
                f"{waits['seconds'] / steps * 1000:.2f} ms in {waits['calls'] / steps:.1f} "
                "driver calls"
            )
            if prof:
                _print_profile("eager steps", prof, args)


def profile(args: argparse.Namespace) -> None:
    from durable_workflow import executor

    driver = Driver(args.skip + args.steps + 1, "profile")
    for _ in range(args.skip):
        executor.run_workflow_task(driver.next_task("workflow"))
        executor.run_activity_task(driver.next_task("activity"))
    profiles = {"workflow": cProfile.Profile(), "activity": cProfile.Profile()}
    for _ in range(args.steps):
        for kind, fn in (
            ("workflow", executor.run_workflow_task),
            ("activity", executor.run_activity_task),
        ):
            task_id = driver.next_task(kind)
            profiles[kind].runcall(fn, task_id)
    for kind, prof in profiles.items():
        _print_profile(f"{kind} task", prof, args)


def _print_profile(what: str, prof: cProfile.Profile, args: argparse.Namespace) -> None:
    for title, order, restrict in (
        ("own time, all code", "tottime", None),
        ("cumulative, durable_workflow only", "cumulative", "durable_workflow/"),
    ):
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out).sort_stats(order)
        if restrict:
            stats.print_stats(restrict, args.top)
        else:
            stats.print_stats(args.top)
        text = out.getvalue()
        text = text[text.find("   ncalls") :]
        for prefix in (
            str(ROOT) + "/",
            sys.prefix + "/lib/python3.11/site-packages/",
            sys.base_prefix + "/lib/python3.11/",
        ):
            text = text.replace(prefix, "")
        print(f"\n===== {what}, cProfile: {title} ({args.steps} steps)\n{text.rstrip()}")


def run(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.test import override_settings

    from durable_workflow.executor import dispatch
    from durable_workflow.testing.inline import InlineBackend

    if args.eager:
        eager(args)
        return
    dispatch.set_backend(InlineBackend())
    # Each task is driven and timed on its own: no activity run eagerly by the
    # workflow task that schedules it, no workflow task by the activity that wakes it.
    engine = {
        **settings.DURABLE_WORKFLOW,
        "EAGER_WORKFLOW_TASKS": False,
        "EAGER_ACTIVITIES": False,
    }
    with override_settings(DURABLE_WORKFLOW=engine):
        split(args)
        profile(args)


if __name__ == "__main__":
    sys.exit(main())
