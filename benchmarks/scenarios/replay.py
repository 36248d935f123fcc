"""Scenario 5: replay cost in the pure runtime (no database, no broker).

Histories are built by driving the real ``WorkflowRuntime`` with the
benchmark's ``Sequence`` workflow and turning its commands into the same events
(and payload shapes, Avro envelopes included) that the executor writes:
``StartAccepted``, ``WorkflowStarted``, then per activity ``ActivityScheduled``,
``ActivityStarted``, ``ActivityCompleted``. Each history ends on an
``ActivityCompleted``, so replaying it issues exactly one new command, like a
real workflow task.

* cold replay: ``WorkflowRuntime(...).feed(events)`` on a fresh runtime, CPU
  time (``time.process_time``), plus ``take_commands()`` and ``dispose()``;
* sticky hit: a warm runtime that has seen everything up to its last command
  is fed only the new tail (``ActivityScheduled``/``Started``/``Completed`` of
  the pending step) and asked for its next command. Also measured: the same
  hit when the caller passes the whole history to ``feed`` (it filters).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

from benchmarks import stats
from benchmarks.scenarios.common import Context, row

SIZES = (100, 1_000, 10_000)
STICKY_SIZES = (100, 1_000, 10_000)
STICKY_HITS = 60
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class HistoryBuilder:
    """A growing history plus the warm runtime that produced it."""

    def __init__(self, codec: str = "avro") -> None:
        from durable_workflow.codec import envelope

        self.codec = codec
        self.envelope = envelope
        self.run_id = str(uuid.uuid4())
        self.events: list[Any] = []
        self.clock = T0
        self._add("StartAccepted", {"command_id": str(uuid.uuid4())})
        self._add(
            "WorkflowStarted",
            {
                "workflow_type": "bench.sequence",
                "workflow_class": "benchmarks.workflows.Sequence",
                "workflow_instance_id": "replay-bench",
                "workflow_run_id": self.run_id,
                "run_number": 1,
                "arguments": envelope.encode([10**9], codec),
                "payload_codec": codec,
                "business_key": None,
                "labels": {},
                "execution_timeout_seconds": None,
                "run_timeout_seconds": None,
            },
        )
        self.runtime = self.new_runtime()
        self.fed = 0

    def new_runtime(self) -> Any:
        from benchmarks.workflows import Sequence
        from durable_workflow.engine.runtime import WorkflowRuntime

        runtime = WorkflowRuntime(
            factory=lambda: Sequence._dw_instantiate(runtime),
            workflow_id="replay-bench",
            run_id=self.run_id,
            codec=self.codec,
        )
        return runtime

    def _add(self, kind: str, payload: dict[str, Any]) -> None:
        from durable_workflow.engine.events import HistoryEvent

        self.clock += dt.timedelta(milliseconds=5)
        self.events.append(HistoryEvent(len(self.events) + 1, kind, payload, self.clock))

    def hit(self, *, full_list: bool = False) -> int:
        """One workflow task on the warm runtime; returns the CPU nanoseconds it took."""
        tail = self.events if full_list else self.events[self.fed :]
        started = time.process_time_ns()
        self.runtime.feed(tail)
        commands = self.runtime.take_commands()
        spent = time.process_time_ns() - started
        self.fed = len(self.events)
        self._record(commands)
        return spent

    def _record(self, commands: list[Any]) -> None:
        from durable_workflow.engine.commands import ScheduleActivity

        assert len(commands) == 1 and isinstance(commands[0], ScheduleActivity), commands
        command = commands[0]
        execution_id, attempt_id, task_id = (str(uuid.uuid4()) for _ in range(3))
        base = {
            "sequence": command.step,
            "activity_execution_id": execution_id,
            "activity_type": command.activity_type,
        }
        self._add(
            "ActivityScheduled",
            {
                **base,
                "activity_class": command.activity_class,
                "queue": "celery",
                "connection": None,
                "task_id": task_id,
            },
        )
        self._add(
            "ActivityStarted",
            {
                **base,
                "activity_attempt_id": attempt_id,
                "attempt_number": 1,
                "task_id": task_id,
                "lease_owner": "bench:1",
                "lease_expires_at": (self.clock + dt.timedelta(minutes=5)).isoformat(),
            },
        )
        self._add(
            "ActivityCompleted",
            {
                **base,
                "activity_attempt_id": attempt_id,
                "attempt_number": 1,
                "result": self.envelope.encode(command.step - 1, self.codec),
            },
        )

    def grow_to(self, size: int) -> None:
        while len(self.events) < size:
            self.hit()


def cold_replay(events: list[Any], builder: HistoryBuilder, reps: int) -> dict[str, Any]:
    loops = max(1, 20_000 // len(events))
    feed_ns, total_ns, wall_ns = [], [], []
    for _ in range(reps):
        feed = total = wall = 0
        for _ in range(loops):
            runtime = builder.new_runtime()
            w0 = time.perf_counter_ns()
            c0 = time.process_time_ns()
            runtime.feed(events)
            c1 = time.process_time_ns()
            commands = runtime.take_commands()
            runtime.dispose()
            c2 = time.process_time_ns()
            wall += time.perf_counter_ns() - w0
            assert len(commands) == 1, commands
            feed += c1 - c0
            total += c2 - c0
        feed_ns.append(feed / loops)
        total_ns.append(total / loops)
        wall_ns.append(wall / loops)
    n = len(events)
    return {
        "events": n,
        "feed_cpu_ms": stats.summary(feed_ns, scale=1e-6),
        "feed_cpu_us_per_event": stats.summary([x / n for x in feed_ns], scale=1e-3),
        "task_cpu_ms": stats.summary(total_ns, scale=1e-6),
        "wall_ms": stats.summary(wall_ns, scale=1e-6),
    }


def run(ctx: Context) -> dict[str, Any]:
    reps = max(3, ctx.repeat)
    builder = HistoryBuilder()
    cold: dict[str, Any] = {}
    sticky: dict[str, Any] = {}
    targets = sorted(set(SIZES) | set(STICKY_SIZES))
    for size in targets:
        builder.grow_to(size)
        if size in SIZES:
            snapshot = list(builder.events)
            cold[str(size)] = cold_replay(snapshot, builder, reps)
            ctx.log(
                f"cold replay of {len(snapshot)} events: "
                f"{cold[str(size)]['feed_cpu_us_per_event']['median']:.1f} µs/event CPU"
            )
        if size in STICKY_SIZES:
            at = len(builder.events)
            tail = [builder.hit() for _ in range(STICKY_HITS)]
            full = [builder.hit(full_list=True) for _ in range(STICKY_HITS)]
            sticky[str(size)] = {
                "events_at_start": at,
                "tail_only_us": stats.summary(tail, scale=1e-3, digits=1),
                "whole_history_passed_us": stats.summary(full, scale=1e-3, digits=1),
            }
            hit = sticky[str(size)]
            ctx.log(
                f"sticky hit at {at} events: {hit['tail_only_us']['median']:.0f} µs (tail), "
                f"{hit['whole_history_passed_us']['median']:.0f} µs (whole list)"
            )
    builder.runtime.dispose()
    worst = max(c["feed_cpu_us_per_event"]["median"] for c in cold.values())
    small, large = sticky[str(STICKY_SIZES[0])], sticky[str(STICKY_SIZES[-1])]
    sticky_ratio = stats.ratio(large["tail_only_us"]["median"], small["tail_only_us"]["median"])
    rows = (
        [
            row(f"cold replay, {c['events']} events (CPU)", c["feed_cpu_ms"]["median"], unit="ms")
            for c in cold.values()
        ]
        + [
            row(
                f"cold replay, {c['events']} events (CPU / event)",
                c["feed_cpu_us_per_event"]["median"],
                unit="µs",
            )
            for c in cold.values()
        ]
        + [
            row(
                f"sticky hit at {s['events_at_start']} events (tail fed)",
                s["tail_only_us"]["median"],
                unit="µs",
            )
            for s in sticky.values()
        ]
        + [
            row(
                f"sticky hit at {s['events_at_start']} events (whole list fed)",
                s["whole_history_passed_us"]["median"],
                unit="µs",
            )
            for s in sticky.values()
        ]
        + [
            row("sticky hit, largest vs smallest history", sticky_ratio, unit="x"),
        ]
    )
    return {
        "status": "ok",
        "repetitions": reps,
        "cold": cold,
        "sticky": sticky,
        "worst_cold_us_per_event": worst,
        "sticky_ratio_large_vs_small": sticky_ratio,
        "rows": rows,
    }
