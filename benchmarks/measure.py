"""Counters around a block of in-process engine calls: statements and round trips
(``dbwork``'s counters), wall and CPU time, and the bytes the default database
connection sent and received (its TCP socket's own counters), plus resident memory
and the plans of the questions a step asks about its run."""

from __future__ import annotations

import contextlib
import gc
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.scenarios.dbwork import counting


def wire_bytes() -> tuple[int, int] | None:
    """(bytes sent and acknowledged, bytes received) on the default connection's
    socket so far; ``None`` when it is not TCP."""
    from django.db import connection

    connection.ensure_connection()
    fd = connection.connection.pgconn.socket
    try:
        with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as sock:
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 192)
    except OSError:
        return None
    if len(info) < 136:
        return None
    acked, received = struct.unpack_from("QQ", info, 120)
    return acked, received


def rss_mb() -> float:
    gc.collect()
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def measured() -> Iterator[dict[str, Any]]:
    """Counters of what runs inside; filled in when the block ends."""
    out: dict[str, Any] = {}
    before = wire_bytes()
    with counting() as counter:
        w0, c0 = time.perf_counter(), time.process_time()
        yield out
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    after = wire_bytes()
    out.update(
        queries=counter.get("queries", 0),
        round_trips=counter.get("round_trips", 0),
        wall_ms=round(wall * 1000, 2),
        cpu_ms=round(cpu * 1000, 2),
    )
    if before and after:
        out.update(bytes_sent=after[0] - before[0], bytes_received=after[1] - before[1])


def question_plans(run_id: Any) -> dict[str, Any]:
    """``EXPLAIN ANALYZE`` of two questions a step asks about its run: is another of
    its activities open, is a workflow task of it ready. Each as psycopg sends it
    (values in the text) and as a prepared statement's generic plan (values as
    parameters), which is what the engine's prepared statements settle on."""
    import uuid

    from django.db import connection

    from durable_workflow.models import Task
    from durable_workflow.store import activities, sql

    questions = {
        "other_open_activity": activities.other_open_clause(run_id, [uuid.uuid4()]),
        "workflow_task_ready": sql.Table(Task).exists_clause(
            [("run_id", "=", run_id), ("task_type", "=", "workflow"), ("status", "=", "ready")]
        ),
    }
    out: dict[str, Any] = {}
    with connection.cursor() as cursor:
        for name, (clause, params) in questions.items():
            numbered = clause
            for index in range(1, len(params) + 1):
                numbered = numbered.replace("%s", f"${index}", 1)
            values = ", ".join(["%s"] * len(params))
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT {clause}", params)
            literal = _plan_facts(cursor.fetchone()[0])
            cursor.execute("SET plan_cache_mode = force_generic_plan")
            try:
                cursor.execute(f"PREPARE dw_bench_q AS SELECT {numbered}")
                sent = f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE dw_bench_q({values})"
                cursor.execute(sent, params)
                generic = _plan_facts(cursor.fetchone()[0])
            finally:
                cursor.execute("DEALLOCATE dw_bench_q")
                cursor.execute("RESET plan_cache_mode")
            out[name] = {"values_in_text": literal, "generic_plan": generic}
    return out


def _plan_facts(plan: Any) -> dict[str, Any]:
    """Execution time, shared buffers, rows removed by filters and scans of a JSON plan."""
    if isinstance(plan, str):
        import json

        plan = json.loads(plan)
    top = plan[0]
    facts: dict[str, Any] = {"execution_ms": top.get("Execution Time"), "removed": 0, "scans": []}
    stack = [top["Plan"]]
    while stack:
        node = stack.pop()
        facts["removed"] += int(node.get("Rows Removed by Filter", 0))
        if "Scan" in node.get("Node Type", ""):
            facts["scans"].append(f"{node['Node Type']} {node.get('Index Name', '')}".strip())
        stack += node.get("Plans", [])
    facts["buffers"] = top["Plan"].get("Shared Hit Blocks", 0) + top["Plan"].get(
        "Shared Read Blocks", 0
    )
    return facts
