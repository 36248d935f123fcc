"""Scenario: a run with a 50,000-event history, and runs whose activities carry 2 MiB.

Everything runs in this process on the benchmark's PostgreSQL database, through
the executor functions a Celery worker calls (no broker: a dispatch backend that
publishes nothing, and the ready tasks are run here one by one), so each task is
measured on its own:

* the long run is built by the executor itself: ``Long`` (queued no-op
  activities, 3 events each) driven by eager chains of ``CHAIN`` steps, each
  chain timed, which also shows whether a step's cost stays flat as the history
  grows;
* then, with eager execution off, at 100 events and at 50,000: a step with the
  run cached (sticky hit) and a step after the cache was cleared (a worker that
  has never seen the run replays it cold); a signal (the client's call, then its
  workflow task, warm and cold) and a query;
* counters around each call: statements and driver round trips (``dbwork``'s
  counters), wall and CPU time, and the bytes the connection received and sent
  (the TCP socket's ``tcpi_bytes_received`` / ``tcpi_bytes_acked``);
* the pure runtime fed the long run's history as the database returns it: CPU
  per event (the target of the ``replay`` scenario, on a real history);
* ``BigPayloads``: activities taking and returning the largest string the
  default ``payload_size_bytes`` limit accepts (2 MiB less 64 bytes), against
  the same run with 10-byte strings: each step's activity task and workflow
  task, a cold workflow task at the end, and this process's resident memory.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from benchmarks import stats
from benchmarks.measure import measured, question_plans, rss_mb
from benchmarks.scenarios.common import Context, row, unique
from benchmarks.scenarios.dbwork import _Unsent

EVENTS, QUICK_EVENTS = 50_000, 10_000
SHORT_EVENTS = 100
CHAIN = 500  # steps per eager chain while building
ANALYZE_EVERY = 5_000  # events
BIG = 2 * 1024 * 1024 - 64  # characters: the encoded frame stays under the 2 MiB limit
SMALL = 10
PAYLOAD_STEPS, QUICK_PAYLOAD_STEPS = 8, 4


def _ready(run_id: Any, kind: str) -> Any:
    from durable_workflow.models import Task

    return Task.objects.get(run_id=run_id, task_type=kind, status="ready").id


def _events(run_id: Any) -> int:
    from durable_workflow.models import WorkflowRun

    return WorkflowRun.objects.values_list("next_sequence", flat=True).get(id=run_id) - 1


def _settings(**changes: Any) -> Any:
    from django.conf import settings
    from django.test import override_settings

    return override_settings(DURABLE_WORKFLOW={**settings.DURABLE_WORKFLOW, **changes})


def _check(outcome: Any, what: str) -> None:
    if outcome != "completed":
        raise RuntimeError(f"{what} returned {outcome!r}")


def analyze() -> None:
    """``VACUUM ANALYZE`` the database, as autovacuum would as tables grow: the
    benchmark's server may run without it (this machine's does), and then the
    planner has no statistics and every update leaves a dead row to read past."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def build(run_id: Any, events: int, deadline: float) -> list[dict[str, Any]]:
    """Eager chains of ``CHAIN`` steps until the run has ``events`` events (with a
    ``VACUUM ANALYZE`` every ``ANALYZE_EVERY`` events); then one workflow task without
    eager execution, so the run waits on a ready activity task."""
    from durable_workflow import executor

    curve: list[dict[str, Any]] = []
    analyzed = 0
    with _settings(EAGER_WORKFLOW_TASKS=True, EAGER_ACTIVITIES=True):
        while (at := _events(run_id)) < events:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the run reached only {at} events")
            if at - analyzed >= ANALYZE_EVERY:
                analyze()
                analyzed = at
            steps = min(CHAIN, max(1, (events - at) // 3))
            with _settings(EAGER_CHAIN_LIMIT=steps):
                w0 = time.perf_counter()
                _check(executor.run_workflow_task(_ready(run_id, "workflow")), "an eager chain")
                wall = time.perf_counter() - w0
            done = (_events(run_id) - at) / 3
            curve.append({"events_at_start": at, "steps": done, "ms_per_step": wall * 1000 / done})
    with _settings(EAGER_WORKFLOW_TASKS=False, EAGER_ACTIVITIES=False):
        _check(executor.run_workflow_task(_ready(run_id, "workflow")), "the workflow task")
    analyze()
    return curve


def step(run_id: Any, *, cold: bool) -> dict[str, Any]:
    """The ready activity task, then its workflow task (after clearing the sticky cache
    when ``cold``); the run is left waiting on the next activity task."""
    from durable_workflow import executor
    from durable_workflow.executor import sticky

    with measured() as activity:
        _check(executor.run_activity_task(_ready(run_id, "activity")), "the activity task")
    if cold:
        sticky.cache.clear()
    task = _ready(run_id, "workflow")
    with measured() as workflow:
        _check(executor.run_workflow_task(task), "the workflow task")
    return {"events": _events(run_id), "activity_task": activity, "workflow_task": workflow}


def signal(run_id: Any, instance_id: str, *, cold: bool) -> dict[str, Any]:
    """A signal while the run waits on an activity: the client's call, then the
    workflow task that delivers it (cold: after clearing the sticky cache)."""
    from durable_workflow import WorkflowStub, executor
    from durable_workflow.executor import sticky

    stub = WorkflowStub.load(instance_id)
    with measured() as call:
        stub.signal("poke", 1)
    if cold:
        sticky.cache.clear()
    task = _ready(run_id, "workflow")
    with measured() as workflow:
        _check(executor.run_workflow_task(task), "the signal's workflow task")
    latency = call["wall_ms"] + workflow["wall_ms"]
    return {"call": call, "workflow_task": workflow, "latency_ms": round(latency, 2)}


def query(instance_id: str) -> dict[str, Any]:
    from durable_workflow import WorkflowStub

    stub = WorkflowStub.load(instance_id)
    with measured() as out:
        out["answer"] = stub.query("pokes")
    return out


def pure_replay(run_id: Any, reps: int) -> dict[str, Any]:
    """The run's history read back (timed), then fed to fresh runtimes (CPU per event)."""
    from benchmarks.workflows import Long
    from durable_workflow.engine.runtime import WorkflowRuntime
    from durable_workflow.store import history

    with measured() as load:
        events = history.load_history(run_id)

    def fresh() -> WorkflowRuntime:
        runtime = WorkflowRuntime(
            factory=lambda: Long._dw_instantiate(runtime),
            workflow_id="long",
            run_id=str(run_id),
            codec="avro",
            workflow_class=Long,
        )
        return runtime

    per_event = []
    for _ in range(reps):
        runtime = fresh()
        c0 = time.process_time_ns()
        runtime.feed(events)
        per_event.append((time.process_time_ns() - c0) / len(events))
        runtime.take_commands()
        runtime.dispose()
    return {
        "events": len(events),
        "load": load,
        "feed_cpu_us_per_event": stats.summary(per_event, scale=1e-3),
    }


def _median(samples: list[dict[str, Any]], side: str, key: str) -> Any:
    values = [s[side][key] for s in samples if key in s[side]]
    return round(stats.median(values), 2) if values else None


def _summary(samples: list[dict[str, Any]], side: str) -> dict[str, Any]:
    keys = ("wall_ms", "cpu_ms", "queries", "round_trips", "bytes_received", "bytes_sent")
    return {key: _median(samples, side, key) for key in keys}


def history_run(ctx: Context, events: int, deadline: float) -> dict[str, Any]:
    from benchmarks.workflows import Long
    from durable_workflow import WorkflowStub
    from durable_workflow.models import WorkflowRun

    instance_id = unique("long")
    WorkflowStub.make(Long, instance_id).start(10**9)
    run = WorkflowRun.objects.get(instance_id=instance_id)
    t0 = time.perf_counter()
    curve = build(run.id, events, deadline)
    built_s = time.perf_counter() - t0
    with _settings(EAGER_WORKFLOW_TASKS=False, EAGER_ACTIVITIES=False):
        return _history_measures(ctx, run, instance_id, curve, built_s)


def _history_measures(
    ctx: Context, run: Any, instance_id: str, curve: list[dict[str, Any]], built_s: float
) -> dict[str, Any]:
    from durable_workflow.executor import sticky
    from durable_workflow.models import WorkflowRun

    plans = question_plans(run.id)
    rss_warm = rss_mb()
    reps = max(3, ctx.repeat)
    warm = [step(run.id, cold=False) for _ in range(reps)]
    cold = [step(run.id, cold=True) for _ in range(reps)]
    step(run.id, cold=False)  # warm again
    signals_warm = [signal(run.id, instance_id, cold=False) for _ in range(reps)]
    signals_cold = [signal(run.id, instance_id, cold=True) for _ in range(reps)]
    sticky.cache.clear()
    rss_cleared = rss_mb()
    size = WorkflowRun.objects.values_list("history_size_bytes", flat=True).get(id=run.id)
    return {
        "events": _events(run.id),
        "history_size_bytes": size,
        "build_seconds": round(built_s, 1),
        "build_ms_per_step_first_last_chain": [
            round(curve[0]["ms_per_step"], 2),
            round(curve[-1]["ms_per_step"], 2),
        ],
        "build_curve": [{k: round(v, 2) for k, v in c.items()} for c in curve],
        "warm_step": {"workflow_task": _summary(warm, "workflow_task")},
        "cold_step": {
            "workflow_task": _summary(cold, "workflow_task"),
            "cpu_us_per_event": round(
                stats.median(s["workflow_task"]["cpu_ms"] * 1000 / s["events"] for s in cold), 2
            ),
        },
        "activity_task": _summary(warm + cold, "activity_task"),
        "signal_warm": {
            "call": _summary(signals_warm, "call"),
            "workflow_task": _summary(signals_warm, "workflow_task"),
            "latency_ms": round(stats.median(s["latency_ms"] for s in signals_warm), 2),
        },
        "signal_cold": {
            "call": _summary(signals_cold, "call"),
            "workflow_task": _summary(signals_cold, "workflow_task"),
            "latency_ms": round(stats.median(s["latency_ms"] for s in signals_cold), 2),
        },
        "query": query(instance_id),
        "pure_replay": pure_replay(run.id, reps),
        "rss_mb_with_run_cached_vs_cleared": [round(rss_warm, 1), round(rss_cleared, 1)],
        "question_plans": plans,
    }


def payload_run(ctx: Context, size: int, steps: int) -> dict[str, Any]:
    from benchmarks.workflows import BigPayloads
    from durable_workflow import WorkflowStub
    from durable_workflow.executor import sticky
    from durable_workflow.models import WorkflowRun

    instance_id = unique(f"payload-{size}")
    WorkflowStub.make(BigPayloads, instance_id).start(steps + 2, size)
    run = WorkflowRun.objects.get(instance_id=instance_id)
    from durable_workflow import executor

    _check(executor.run_workflow_task(_ready(run.id, "workflow")), "the first workflow task")
    rss = [rss_mb()]
    samples = []
    for _ in range(steps):
        samples.append(step(run.id, cold=False))
        rss.append(rss_mb())
    cold = step(run.id, cold=True)
    sticky.cache.clear()
    rss_cleared = rss_mb()
    size_bytes = WorkflowRun.objects.values_list("history_size_bytes", flat=True).get(id=run.id)
    return {
        "payload_chars": size,
        "steps": steps,
        "history_size_bytes": size_bytes,
        "activity_task": _summary(samples, "activity_task"),
        "workflow_task": _summary(samples, "workflow_task"),
        "step_wall_ms": round(
            stats.median(
                s["activity_task"]["wall_ms"] + s["workflow_task"]["wall_ms"] for s in samples
            ),
            2,
        ),
        "warm_reads_first_last": [
            samples[0]["workflow_task"].get("bytes_received"),
            samples[-1]["workflow_task"].get("bytes_received"),
        ],
        "warm_workflow_task_ms_per_step": [s["workflow_task"]["wall_ms"] for s in samples],
        "cold_workflow_task": cold["workflow_task"],
        "rss_mb_per_step": [round(r, 1) for r in rss],
        "rss_growth_mb": round(rss[-1] - rss[0], 1),
        "rss_mb_after_clearing_cache": round(rss_cleared, 1),
    }


def run(ctx: Context) -> dict[str, Any]:
    from durable_workflow.executor import dispatch, sticky

    events = QUICK_EVENTS if ctx.quick else EVENTS
    payload_steps = QUICK_PAYLOAD_STEPS if ctx.quick else PAYLOAD_STEPS
    deadline = time.monotonic() + 1800 * ctx.deadline_scale
    previous = dispatch.set_backend(_Unsent())
    try:
        short = history_run(ctx, SHORT_EVENTS, deadline)
        ctx.log(f"{short['events']}-event run: {_line(short)}")
        long = history_run(ctx, events, deadline)
        ctx.log(f"{long['events']}-event run (built in {long['build_seconds']} s): {_line(long)}")
        with _settings(EAGER_WORKFLOW_TASKS=False, EAGER_ACTIVITIES=False):
            small = payload_run(ctx, SMALL, payload_steps)
            big = payload_run(ctx, BIG, payload_steps)
            with tempfile.TemporaryDirectory(prefix="dw-bench-payloads-") as root:
                storage = {"root": root}
                with _settings(PAYLOAD_STORAGE="filesystem", PAYLOAD_STORAGE_OPTIONS=storage):
                    offloaded = payload_run(ctx, BIG, payload_steps)
        ctx.log(
            f"payload steps: {small['step_wall_ms']} ms ({SMALL} chars) vs "
            f"{big['step_wall_ms']} ms ({BIG} chars); RSS growth {small['rss_growth_mb']} / "
            f"{big['rss_growth_mb']} MB over {payload_steps} steps; offloaded to files: "
            f"{offloaded['step_wall_ms']} ms, RSS growth {offloaded['rss_growth_mb']} MB"
        )
    finally:
        dispatch.set_backend(previous)
        sticky.cache.clear()
    return {
        "status": "ok",
        "short": short,
        "long": long,
        "small_payload": small,
        "big_payload": big,
        "big_payload_offloaded": offloaded,
        "rows": _rows(short, long, small, big) + _offload_rows(big, offloaded),
    }


def _line(r: dict[str, Any]) -> str:
    return (
        f"warm step {r['warm_step']['workflow_task']['wall_ms']} ms, cold "
        f"{r['cold_step']['workflow_task']['wall_ms']} ms "
        f"({r['cold_step']['cpu_us_per_event']} µs CPU/event), signal "
        f"{r['signal_warm']['latency_ms']} ms warm / {r['signal_cold']['latency_ms']} ms cold"
    )


def _rows(short: dict[str, Any], long: dict[str, Any], small: Any, big: Any) -> list[Any]:
    def pair(metric: str, get: Any, unit: str = "") -> dict[str, Any]:
        a, b = get(long), get(short)
        return row(
            f"{metric}: {long['events']} vs {short['events']} events",
            a,
            b,
            stats.ratio(a, b) if isinstance(a, int | float) else None,
            unit,
        )

    wt = "workflow_task"
    return [
        pair("sticky hit, workflow task wall", lambda r: r["warm_step"][wt]["wall_ms"], "ms"),
        pair("sticky hit, bytes received", lambda r: r["warm_step"][wt]["bytes_received"], "B"),
        pair("cold workflow task wall", lambda r: r["cold_step"][wt]["wall_ms"], "ms"),
        pair("cold workflow task CPU / event", lambda r: r["cold_step"]["cpu_us_per_event"], "µs"),
        pair(
            "cold workflow task, bytes received",
            lambda r: r["cold_step"][wt]["bytes_received"],
            "B",
        ),
        pair(
            "pure replay CPU / event",
            lambda r: r["pure_replay"]["feed_cpu_us_per_event"]["median"],
            "µs",
        ),
        pair("signal call, statements", lambda r: r["signal_warm"]["call"]["queries"]),
        pair(
            "signal call, bytes received", lambda r: r["signal_warm"]["call"]["bytes_received"], "B"
        ),
        pair("signal to task done, warm", lambda r: r["signal_warm"]["latency_ms"], "ms"),
        pair("signal to task done, cold", lambda r: r["signal_cold"]["latency_ms"], "ms"),
        pair("query wall", lambda r: r["query"]["wall_ms"], "ms"),
        row(
            f"payload step wall: {BIG} vs {SMALL} chars",
            big["step_wall_ms"],
            small["step_wall_ms"],
            stats.ratio(big["step_wall_ms"], small["step_wall_ms"]),
            "ms",
        ),
        row(
            f"cold workflow task after {big['steps']} big steps",
            big["cold_workflow_task"]["wall_ms"],
            small["cold_workflow_task"]["wall_ms"],
            None,
            "ms",
        ),
        row(
            f"RSS growth over {big['steps']} steps (sticky cache kept)",
            big["rss_growth_mb"],
            small["rss_growth_mb"],
            None,
            "MB",
        ),
    ]


def _offload_rows(big: dict[str, Any], offloaded: dict[str, Any]) -> list[Any]:
    """The big payloads inline against the same ones in the filesystem payload storage."""
    return [
        row(
            f"payload step wall, {key}: offloaded vs inline",
            offloaded[key] if key == "step_wall_ms" else offloaded[key]["wall_ms"],
            big[key] if key == "step_wall_ms" else big[key]["wall_ms"],
            None,
            "ms",
        )
        for key in ("step_wall_ms", "cold_workflow_task")
    ] + [
        row(
            "RSS growth, offloaded vs inline",
            offloaded["rss_growth_mb"],
            big["rss_growth_mb"],
            None,
            "MB",
        )
    ]
