"""The cyclic garbage collector held off while a whole history is read and replayed.

A cold replay allocates a few container objects per event and keeps nearly all of
them (the events, the operations, the ledger's indexes) until the task ends. The
collector runs every few hundred allocations, and each time the heap has grown by
a quarter it walks all of it, so over a history of 50,000 events it spends about
5 µs of CPU per event finding almost nothing (docs/performance.md, "Long histories
and big payloads"). Held off for the read and the replay, it catches up once
afterwards, on the next allocation.

The collector is the process's: pauses from several threads overlap, and it runs
again when the last one ends. It is left alone when someone else had turned it off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

#: Below this many events a replay is quick and allocates little: no pause.
MANY_EVENTS = 1_000

_lock = threading.Lock()
_holders = 0
_ours = False  # whether the first holder turned the collector off (and the last turns it on)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside the block (explicit ``gc.collect()`` still runs)."""
    global _holders, _ours
    with _lock:
        _holders += 1
        if _holders == 1:
            _ours = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _ours:
                gc.enable()


def paused_for(events: int) -> contextlib.AbstractContextManager[None]:
    """:func:`paused` when ``events`` is enough for the collector's walks to matter."""
    return paused() if events >= MANY_EVENTS else contextlib.nullcontext()
