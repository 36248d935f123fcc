"""Physical counters for the ``floor`` and ``scaling`` scenarios.

* WAL: the records between two LSNs, read back with ``pg_walinspect`` and
  attributed to a database by the relations their blocks belong to (a commit
  record, which names no block, goes with the transaction's other records).
  The attribution makes the counts exact on a server other clients write to.
* Bytes over the wire: the kernel's per-socket counters (``ss -tinp``) of the
  given processes' TCP connections to PostgreSQL and Redis.
* Broker commands: Redis ``MONITOR`` filtered to the benchmark's database.
* CPU: utime + stime of processes from ``/proc`` (worker processes and the
  PostgreSQL backends serving a database), and the machine's idle share.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks import config

_TICK = os.sysconf("SC_CLK_TCK")
_BLOCK = re.compile(r"rel \d+/(\d+)/(\d+)")


def admin() -> Any:
    import psycopg

    return psycopg.connect(config.pg_url("postgres"), autocommit=True, connect_timeout=5)


def connect(database: str) -> Any:
    import psycopg

    return psycopg.connect(config.pg_url(database), autocommit=True, connect_timeout=5)


def ensure_walinspect(database: str) -> None:
    with connect(database) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")


def database_oids(conn: Any, names: list[str]) -> dict[int, str]:
    rows = conn.execute("SELECT oid, datname FROM pg_database WHERE datname = ANY(%s)", [names])
    return {int(oid): name for oid, name in rows.fetchall()}


def current_lsn(conn: Any) -> str:
    return str(conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0])


def relation_names(database: str) -> dict[int, str]:
    """File node -> relation name (tables, indexes, TOAST) of one database."""
    with connect(database) as conn:
        rows = conn.execute(
            "SELECT pg_relation_filenode(c.oid), c.relname, c.relkind FROM pg_class c "
            "WHERE pg_relation_filenode(c.oid) IS NOT NULL"
        ).fetchall()
    return {int(node): f"{name}" + (" (index)" if kind == "i" else "") for node, name, kind in rows}


def wal_between(start: str, end: str, oid: int) -> dict[str, Any]:
    """WAL records of one database between two LSNs: records, bytes, full-page
    images, commits, and per relation file node the bytes and record types; plus
    ``elsewhere``, what the rest of the server wrote. Read through the benchmark
    database, where ``ensure_walinspect`` put the extension."""
    mine = f"%/{int(oid)}/%"
    with connect(config.PG_DB) as conn:
        rows = conn.execute(
            "WITH r AS (SELECT * FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)), "
            "x AS (SELECT DISTINCT xid FROM r WHERE xid <> '0' AND block_ref LIKE %s) "
            "SELECT xid, resource_manager, record_type, record_length, fpi_length, block_ref, "
            "block_ref LIKE %s OR xid IN (SELECT xid FROM x) AS ours FROM r",
            [start, end, mine, mine],
        ).fetchall()
    out: dict[str, Any] = {
        "records": 0,
        "bytes": 0,
        "fpi_bytes": 0,
        "fpi_count": 0,
        "commits": 0,
        "by_type": collections.Counter(),
        "relations": {},
        "elsewhere": {"records": 0, "bytes": 0, "commits": 0},
    }
    for _, rmgr, rtype, length, fpi, block_ref, ours in rows:
        commit = rmgr == "Transaction" and rtype.startswith("COMMIT")
        if not ours:
            other = out["elsewhere"]
            other["records"] += 1
            other["bytes"] += int(length)
            other["commits"] += int(commit)
            continue
        kind = f"{rmgr}/{rtype}"
        out["records"] += 1
        out["bytes"] += int(length)
        out["fpi_bytes"] += int(fpi or 0)
        out["fpi_count"] += (block_ref or "").count("FPW")
        out["by_type"][kind] += 1
        out["commits"] += int(commit)
        match = _BLOCK.search(block_ref or "")
        if match:
            rel = out["relations"].setdefault(
                int(match.group(2)), {"bytes": 0, "by_type": collections.Counter()}
            )
            rel["bytes"] += int(length)
            rel["by_type"][kind] += 1
    return out


@contextlib.contextmanager
def wal_kept(conn: Any) -> Iterator[None]:
    """Keep the server's WAL from now until the block ends (a temporary replication
    slot of this session), so a checkpoint that others' writes bring on cannot
    recycle the segments before they are read."""
    name = f"dw_floor_{uuid.uuid4().hex[:12]}"
    conn.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", [name])
    try:
        yield
    finally:
        conn.execute("SELECT pg_drop_replication_slot(%s)", [name])


def checkpoints(conn: Any) -> int:
    row = conn.execute("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter")
    return int(row.fetchone()[0])


def server_wal_stats(conn: Any) -> dict[str, int]:
    row = conn.execute(
        "SELECT wal_records, wal_fpi, wal_bytes, wal_write, wal_sync FROM pg_stat_wal"
    ).fetchone()
    keys = ("wal_records", "wal_fpi", "wal_bytes", "wal_write", "wal_sync")
    return {key: int(value) for key, value in zip(keys, row, strict=True)}


def database_stats(conn: Any, database: str) -> dict[str, int]:
    row = conn.execute(
        "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted "
        "FROM pg_stat_database WHERE datname = %s",
        [database],
    ).fetchone()
    keys = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")
    return dict(zip(keys, (int(v or 0) for v in row), strict=True))


def table_stats(database: str) -> dict[str, dict[str, int]]:
    """Per table of ``database``: rows inserted, updated (HOT), deleted; index scans."""
    with connect(database) as conn:
        tables = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del "
            "FROM pg_stat_user_tables"
        ).fetchall()
        scans = conn.execute(
            "SELECT relname, sum(idx_scan) FROM pg_stat_user_indexes GROUP BY relname"
        ).fetchall()
    index_scans = {name: int(total or 0) for name, total in scans}
    return {
        name: {
            "inserted": int(ins),
            "updated": int(upd),
            "hot_updated": int(hot),
            "deleted": int(dele),
            "index_scans": index_scans.get(name, 0),
        }
        for name, ins, upd, hot, dele in tables
    }


def diff_tables(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    out = {}
    for name, counts in after.items():
        delta = {k: v - before.get(name, {}).get(k, 0) for k, v in counts.items()}
        if any(delta.values()):
            out[name] = delta
    return out


def backend_pids(conn: Any, database: str) -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'",
        [database],
    ).fetchall()
    return [int(pid) for (pid,) in rows]


def connections_by_application(conn: Any, database: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = %s "
        "AND backend_type = 'client backend' GROUP BY 1",
        [database],
    ).fetchall()
    return {str(name): int(count) for name, count in rows}


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_of(pids: list[int]) -> dict[int, float]:
    return {pid: cpu_seconds(pid) for pid in pids}


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def socket_bytes(pids: list[int]) -> dict[tuple[str, str], tuple[int, str, int, int]]:
    """Per TCP connection of ``pids`` to PostgreSQL or Redis: (pid, service, bytes
    sent, bytes received), from the kernel's counters."""
    ports = {config.PG_PORT: "postgresql", config.REDIS_PORT: "redis"}
    wanted = set(pids)
    text = subprocess.run(
        ["ss", "-tinpH", "state", "established"], capture_output=True, text=True, timeout=10
    ).stdout
    out: dict[tuple[str, str], tuple[int, str, int, int]] = {}
    current: tuple[tuple[str, str], int, str] | None = None
    for line in text.splitlines():
        if not line.startswith(("\t", " ")):
            current = None
            parts = line.split()
            if len(parts) < 4:
                continue
            local, peer = parts[2], parts[3]
            service = ports.get(int(peer.rsplit(":", 1)[1])) if ":" in peer else None
            pid_match = re.search(r"pid=(\d+)", line)
            if service and pid_match and int(pid_match.group(1)) in wanted:
                current = ((local, peer), int(pid_match.group(1)), service)
        elif current is not None:
            sent = re.search(r"bytes_sent:(\d+)", line)
            received = re.search(r"bytes_received:(\d+)", line)
            out[current[0]] = (
                current[1],
                current[2],
                int(sent.group(1)) if sent else 0,
                int(received.group(1)) if received else 0,
            )
            current = None
    return out


def wire_delta(
    before: dict[tuple[str, str], tuple[int, str, int, int]],
    after: dict[tuple[str, str], tuple[int, str, int, int]],
) -> dict[str, dict[str, int]]:
    """Bytes sent and received per service between two ``socket_bytes`` snapshots."""
    totals: dict[str, dict[str, int]] = {}
    for key, (_, service, sent, received) in after.items():
        _, _, sent0, received0 = before.get(key, (0, service, 0, 0))
        entry = totals.setdefault(service, {"sent": 0, "received": 0, "connections": 0})
        entry["sent"] += sent - sent0
        entry["received"] += received - received0
        entry["connections"] += 1
    return totals


class RedisCommands:
    """Counts the commands clients send to the benchmark's Redis database (MONITOR)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.bytes = 0
        self._token = f"floor-stop-{uuid.uuid4().hex}"
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def __enter__(self) -> RedisCommands:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("Redis MONITOR did not start")
        return self

    def _watch(self) -> None:
        import redis

        client = redis.Redis.from_url(config.REDIS_URL)
        with client.monitor() as monitor:
            self._ready.set()
            while True:
                event = monitor.next_command()
                command = str(event.get("command", ""))
                if self._token in command:
                    return
                if int(event.get("db", -1)) != config.REDIS_DB:
                    continue
                self.counts[command.split(" ", 1)[0].upper()] += 1
                self.bytes += len(command)

    def __exit__(self, *exc: object) -> None:
        import redis

        redis.Redis.from_url(config.REDIS_URL).echo(self._token)
        if self._thread is not None:
            self._thread.join(10)
