#!/usr/bin/env python
"""What the determinism guards cost outside workflow code (issue 29's target: < 2 % of a step).

Inside workflow code a guarded call is refused, so only the cost outside it
matters: every ``time.time()``, ``os.urandom()`` ... that Celery, Django or the
engine itself makes now goes through a wrapper. This prints the wrapper's
overhead per call (the same function timed before and after ``install()``, in
one process, best of several rounds) and, with ``--calls-per-step N`` (the
count ``tests/integration/test_unsafe_calls.py`` keeps at or under 20 for an
activity step; 12 on SQLite and 15 on PostgreSQL when it was written), what
that adds to one step of ``--step-ms`` milliseconds.

    python benchmarks/guard_overhead.py [--rounds 7] [--calls-per-step 15] [--step-ms 2.45]

No database and no broker: it runs in seconds.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import timeit

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CALLS = ("time.time()", "time.monotonic()", "os.urandom(10)", "os.getpid()")
NUMBER = 200_000


def best_ns(stmt: str, rounds: int) -> float:
    import time  # noqa: F401  (used by the statements)

    namespace = {"time": sys.modules["time"], "os": os}
    return min(timeit.repeat(stmt, globals=namespace, number=NUMBER, repeat=rounds)) / NUMBER * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls-per-step", type=int, default=15)
    parser.add_argument("--step-ms", type=float, default=2.45)
    args = parser.parse_args()

    before = {stmt: best_ns(stmt, args.rounds) for stmt in CALLS}
    from durable_workflow import unsafe_calls

    unsafe_calls.install()
    after = {stmt: best_ns(stmt, args.rounds) for stmt in CALLS}
    print(f"{'call':<18} {'plain ns':>9} {'guarded ns':>11} {'overhead ns':>12}")
    for stmt in CALLS:
        extra = after[stmt] - before[stmt]
        print(f"{stmt:<18} {before[stmt]:>9.0f} {after[stmt]:>11.0f} {extra:>12.0f}")
    # The wrapper is the same for every call: its overhead is one figure, and the
    # median of the four keeps one noisy timing from deciding it.
    extra = statistics.median(after[s] - before[s] for s in CALLS)
    per_step_us = extra * args.calls_per_step / 1000
    share = per_step_us / (args.step_ms * 1000) * 100
    print(
        f"\n{args.calls_per_step} guarded calls per step x {extra:.0f} ns = {per_step_us:.1f} us "
        f"= {share:.2f} % of a {args.step_ms} ms step"
    )


if __name__ == "__main__":
    main()
