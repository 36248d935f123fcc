"""Sticky execution: keep suspended workflow bodies warm in this process.

After a workflow task commits, its runtime (greenlets and all) is kept here.
The next task of the same run in this process resumes it by feeding only the
events after the ones it has seen, instead of replaying the whole history.
The cached runtime is used only when the run's committed workflow-task
boundary is exactly the one this runtime produced, so a task that ran
elsewhere in between (or a rolled-back one) always leads to a cold replay.
Warm and cold execution give identical results; the cache only saves time.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import uuid
from typing import Any

from durable_workflow import observe
from durable_workflow.conf import get_settings
from durable_workflow.engine.runtime import WorkflowRuntime


@dataclasses.dataclass
class _Entry:
    runtime: WorkflowRuntime
    boundary: int
    expires: float


@dataclasses.dataclass
class StickyStats:
    hits: int = 0
    misses: int = 0
    forced_cold: int = 0
    evictions: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class StickyCache:
    """An LRU of warm runtimes, one per thread: greenlets cannot cross threads."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.RLock()  # ``_entries`` may be first touched under the lock
        self._every: list[collections.OrderedDict[uuid.UUID, _Entry]] = []
        self.stats = StickyStats()

    @property
    def _entries(self) -> collections.OrderedDict[uuid.UUID, _Entry]:
        entries = getattr(self._local, "entries", None)
        if entries is None:
            entries = self._local.entries = collections.OrderedDict()
            with self._lock:
                self._every.append(entries)
        return entries

    def __len__(self) -> int:
        return len(self._entries)

    def take(
        self, run_id: uuid.UUID, boundary: int, workflow_class: type
    ) -> WorkflowRuntime | None:
        """The warm runtime for ``run_id`` if it is still valid; removes it either way.

        A runtime whose body belongs to another class than ``workflow_class`` (the one
        registered, or mocked, for the run's type now) is stale: the run replays cold.
        """
        if not get_settings().STICKY_ENABLED:
            return None
        with self._lock:
            entry = self._entries.pop(run_id, None)
        if entry is None:
            self.stats.misses += 1
            observe.sticky("not_cached")
            return None
        stale = entry.runtime.workflow_class is not workflow_class
        if stale or entry.boundary != boundary or entry.expires < time.monotonic():
            self.stats.forced_cold += 1
            observe.sticky("stale")
            entry.runtime.dispose()
            return None
        self.stats.hits += 1
        observe.sticky("hit")
        return entry.runtime

    def put(self, run_id: uuid.UUID, runtime: WorkflowRuntime, boundary: int) -> None:
        settings = get_settings()
        if not settings.STICKY_ENABLED or settings.STICKY_CACHE_CAPACITY <= 0:
            runtime.dispose()
            return
        evicted: list[_Entry] = []
        with self._lock:
            old = self._entries.pop(run_id, None)
            if old is not None:
                evicted.append(old)
            self._entries[run_id] = _Entry(
                runtime, boundary, time.monotonic() + settings.STICKY_TTL_SECONDS
            )
            while len(self._entries) > settings.STICKY_CACHE_CAPACITY:
                evicted.append(self._entries.popitem(last=False)[1])
                self.stats.evictions += 1
        for entry in evicted:
            entry.runtime.dispose()

    def discard(self, run_id: uuid.UUID) -> None:
        with self._lock:
            entry = self._entries.pop(run_id, None)
        if entry is not None:
            entry.runtime.dispose()

    def clear(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.runtime.dispose()

    def snapshot(self) -> dict[str, Any]:
        settings = get_settings()
        return {
            "enabled": settings.STICKY_ENABLED,
            "capacity": settings.STICKY_CACHE_CAPACITY,
            "size": sum(len(entries) for entries in self._every),
            **self.stats.as_dict(),
        }


#: The process-wide cache (one per worker process).
cache = StickyCache()
