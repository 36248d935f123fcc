"""The bounded cache of verified payload bytes (never decoded values).

Keyed by ``(uri, sha256, size, codec)``: a hit is bytes that once matched that
very reference, so a warm replay does not fetch the same object again.
"""

from __future__ import annotations

import collections
import threading


class VerifiedCache:
    """Bounded LRU of verified bytes (entry count and total byte ceiling)."""

    def __init__(self, max_entries: int = 64, max_bytes: int = 64 * 1024 * 1024):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[tuple[str, str, int, str], bytes] = (
            collections.OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int, str]) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def put(self, key: tuple[str, str, int, str], data: bytes) -> None:
        if len(data) > self.max_bytes or self.max_entries <= 0:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = data
            self._bytes += len(data)
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= len(evicted)

    def discard(self, uri: str) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == uri]:
                self._bytes -= len(self._items.pop(key))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)
