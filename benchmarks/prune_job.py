"""The pruning side of scenario ``prune``, in its own process as an operator's would be.

``python -m benchmarks.prune_job --older-than 30d --limit 50000 --batch-size 500``
calls what ``manage.py workflow_prune`` calls (``operations.prune.prune``) on the
database ``DW_BENCH_PG_DB`` and prints one JSON line when it starts and one after
each batch: the monotonic clock, the runs pruned so far and the rows deleted so far
per kind. Its connection is named ``dw-bench-prune`` (``application_name``), so
``pg_stat_activity`` tells it from the workers. The last line also gives the CPU
seconds this process and its PostgreSQL backend used (``/proc``; the server must be
on this machine), which do not depend on how busy the machine is as wall time does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.prune_job")
    parser.add_argument("--older-than", required=True)
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--now", help="ISO time the retention counts from (default: now)")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    os.environ["DW_BENCH_WORKER_NAME"] = "prune"
    import django

    django.setup()
    from durable_workflow.operations.prune import PruneReport, parse_age, prune

    def emit(**fields: object) -> None:
        sys.stdout.write(json.dumps({"t": time.monotonic(), **fields}) + "\n")
        sys.stdout.flush()

    def progress(report: PruneReport) -> None:
        emit(kind="batch", runs=report.pruned_runs, rows=report.rows, total=report.total_runs)

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    cpu = (time.process_time(), _cpu_seconds(backend))
    emit(kind="start", backend_pid=backend)
    report = prune(
        older_than=parse_age(args.older_than),
        batch_size=args.batch_size,
        limit=args.limit,
        progress=progress,
        now=dt.datetime.fromisoformat(args.now) if args.now else None,
    )
    emit(
        kind="end",
        runs=report.pruned_runs,
        rows=report.rows,
        total=report.total_runs,
        client_cpu_seconds=time.process_time() - cpu[0],
        backend_cpu_seconds=_cpu_seconds(backend) - cpu[1],
    )
    return 0


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process on this machine, from ``/proc/<pid>/stat``."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
