"""Counters around a block of in-process engine calls: statements and round trips
(``dbwork``'s counters), wall and CPU time, and the bytes the default database
connection sent and received (its TCP socket's own counters), plus resident memory."""

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
