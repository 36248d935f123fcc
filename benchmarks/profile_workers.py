#!/usr/bin/env python
"""Sample live Celery workers with py-spy while they run the throughput load.

Starts the benchmark's workers, keeps them busy with one-activity workflows
(started in batches, like the throughput scenario) and records every worker
with ``py-spy record --format raw`` for ``--seconds``. Prints the share of
samples (inclusive) of the hottest ``durable_workflow`` functions and the
functions with the most own time, and keeps the folded stacks in
benchmarks/results/profiles/ (feed them to any flame-graph tool).

    python benchmarks/profile_workers.py [--seconds 20] [--top 30]

py-spy needs ptrace rights on the workers (root, or CAP_SYS_PTRACE).
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def fold(
    paths: list[pathlib.Path],
) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
            for frame in set(frames):
                inclusive[frame] += n
            own[frames[-1]] += n
    return total, inclusive, own


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(pathlib.Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(spy):
        raise SystemExit("py-spy is not installed (pip install py-spy)")

    from benchmarks import config, services

    services.check_services()
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    services.create_database(config.PG_DB)
    services.flush_redis()
    import django

    django.setup()
    services.migrate()
    out_dir = config.RESULTS_DIR / "profiles"
    out_dir.mkdir(parents=True, exist_ok=True)
    from django.db import transaction

    from benchmarks.scenarios.common import unique, wait_prefix_completed
    from benchmarks.workers import running_workers
    from benchmarks.workflows import OneStep
    from durable_workflow import WorkflowStub

    def batch() -> None:
        prefix = unique("prof") + "-"
        with transaction.atomic():
            for index in range(args.batch):
                WorkflowStub.make(OneStep, f"{prefix}{index}").start()
        wait_prefix_completed(prefix, args.batch, timeout=120)

    raws: list[pathlib.Path] = []
    try:
        with running_workers(2) as workers:
            batch()  # warm-up
            spies = []
            for worker in workers:
                raw = out_dir / f"{worker.name}.folded"
                raws.append(raw)
                spies.append(
                    subprocess.Popen(
                        [
                            spy,
                            "record",
                            "-p",
                            str(worker.pid),
                            "-r",
                            "250",
                            "-d",
                            str(args.seconds),
                            "-f",
                            "raw",
                            "-o",
                            str(raw),
                            "--nonblocking",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            deadline = time.monotonic() + args.seconds
            done = 0
            while time.monotonic() < deadline:
                batch()
                done += args.batch
            for process in spies:
                process.wait(timeout=args.seconds + 30)
    finally:
        from django.db import connections

        connections.close_all()
        services.drop_database(config.PG_DB)
        services.flush_redis()

    total, inclusive, own = fold([r for r in raws if r.exists()])
    print(f"{done} workflows while sampling; {total} samples of 2 workers (busy time only)")
    print("\n--- inclusive share, durable_workflow functions")
    shown = 0
    for frame, n in inclusive.most_common():
        if "durable_workflow/" in frame and shown < args.top:
            print(f"{n / total * 100:5.1f}%  {frame}")
            shown += 1
    print("\n--- inclusive share, selected library layers")
    for needle in (
        "Connection.wait (psycopg",
        "SQLCompiler.as_sql",
        "SQLCompiler.execute_sql",
        "Atomic.__exit__",
        "BaseDatabaseWrapper.connect",
        "Channel._brpop_read",
        "Message.ack",
        "send_task",
    ):
        n = sum(v for k, v in inclusive.items() if needle in k)
        print(f"{n / total * 100:5.1f}%  {needle}")
    print("\n--- own time")
    for frame, n in own.most_common(args.top):
        print(f"{n / total * 100:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
