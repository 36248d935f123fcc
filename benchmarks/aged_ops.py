"""The operator-side figures of the ``aged`` scenario, timed in the harness process.

Each operation runs once to warm up and then ``ROUNDS`` times; the figure is the
median (and max) server time in milliseconds, with the statements it sent. The
three slowest reads of the last round are run again under ``EXPLAIN (ANALYZE,
BUFFERS)``, so the plan and the pages it touched (robust to machine load, unlike
the times) go into the results with the figure.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable
from typing import Any

from benchmarks import stats

ROUNDS = 3
#: What the issue asks of each, in milliseconds.
TARGETS_MS = {
    "repair pass, nothing due": 200,
    "admin runs changelist": 300,
    "admin run timeline": 300,
    "admin run timeline, filtered by event type": 300,
    "doctor": 5_000,
    "list_runs by a search attribute (one customer)": 100,
    "list_runs by a search attribute (one region of five)": 100,
    # Not in the issue: the engine's own bars for the other pages an operator opens
    # first (the runs list's) and for a metrics scrape.
    "admin dashboard": 300,
    "admin runs list, needs attention": 300,
    "operator metrics": 1_000,
}


def explain(sql: str) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return "\n".join(line for (line,) in cursor.fetchall())


def timed(fn: Callable[[], Any], rounds: int = ROUNDS) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn()  # warm-up: connection, caches, the pages it reads
    times = []
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    # The three slowest reads of the last round, each with its plan.
    reads = [q for q in captured.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    slowest = sorted(reads, key=lambda q: float(q["time"]), reverse=True)[:3]
    out: dict[str, Any] = {
        "ms": stats.summary(times, scale=1000),
        "statements": len(captured.captured_queries),
        "slowest": [
            {"ms": float(q["time"]) * 1000, "sql": q["sql"], "plan": explain(q["sql"])}
            for q in slowest
        ],
    }
    return out


def _client() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    user_model = get_user_model()
    user = user_model.objects.filter(username="bench-admin").first()
    if user is None:
        user = user_model.objects.create_superuser("bench-admin", "bench@example.com", "x")
    client = Client()
    client.force_login(user)
    return client


def _get(client: Any, url: str) -> Callable[[], None]:
    def fetch() -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url}: {response.status_code}")

    return fetch


def _doctor() -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    # No workers run here, so it reports errors: only its time counts.
    with contextlib.suppress(CommandError):
        call_command("workflow_doctor", stdout=io.StringIO())


def measure(log: Callable[[str], None]) -> dict[str, Any]:
    """Every operation on the database Django is connected to now."""
    from durable_workflow.executor.repair import repair_pass
    from durable_workflow.operations.metrics import operator_metrics
    from durable_workflow.models import WorkflowRun
    from durable_workflow.visibility import list_runs

    client = _client()
    # A run from the middle of the year (or any, on the empty database).
    count = WorkflowRun.objects.count()
    run = WorkflowRun.objects.order_by("created_at")[count // 2 : count // 2 + 1].first()
    customer = (run.search_attributes or {}).get("CustomerId", "cust-000001") if run else ""
    base = "/admin/durable_workflow/workflowrun/"
    operations: list[tuple[str, Callable[[], Any]]] = [
        ("repair pass, nothing due", repair_pass),
        ("admin runs changelist", _get(client, base)),
        ("admin dashboard", _get(client, f"{base}dashboard/")),
        ("admin runs list, needs attention", _get(client, f"{base}?attention=any")),
        ("operator metrics", operator_metrics),
        ("doctor", _doctor),
        (
            "list_runs by a search attribute (one customer)",
            lambda: list_runs(search_attributes={"CustomerId": customer}),
        ),
        (
            "list_runs by a search attribute (one region of five)",
            lambda: list_runs(search_attributes={"Region": "eu-west"}),
        ),
    ]
    if run is not None:
        operations += [
            ("admin run timeline", _get(client, f"{base}{run.pk}/timeline/")),
            (
                "admin run timeline, filtered by event type",
                _get(client, f"{base}{run.pk}/timeline/?event_type=ActivityCompleted"),
            ),
        ]
    out: dict[str, Any] = {"runs": count}
    for name, fn in operations:
        out[name] = timed(fn)
        log(f"{name}: {out[name]['ms']['median']:.1f} ms (median of {ROUNDS})")
    report = repair_pass()
    out["repair pass, nothing due"]["report"] = {
        k: v for k, v in vars(report).items() if isinstance(v, int)
    }
    return out


def main() -> None:
    """``python -m benchmarks.aged_ops DB [OUT.json]``: the figures on an existing database
    (e.g. the clone ``bench.sh --scenario aged --keep-db`` leaves), after ``migrate``."""
    import json
    import os
    import sys

    os.environ["DW_BENCH_PG_DB"] = sys.argv[1]
    os.environ["DW_BENCH_ADMIN"] = "1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    import django

    django.setup()
    from django.core.management import call_command

    t0 = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    print(f"migrate: {time.monotonic() - t0:.1f} s", flush=True)
    out = measure(print)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as handle:
            json.dump(out, handle, indent=2, default=str)


if __name__ == "__main__":
    main()
