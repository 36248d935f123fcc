"""Errors in the processes' logs: how many, and whether one kept coming back after the
faults were over (a process logging the same error forever has not recovered)."""

from __future__ import annotations

import collections
import datetime as dt
import pathlib
import re
from typing import Any

# Celery's and the suite's Django log format: "[2026-01-31 12:00:00,123: ERROR/MainProcess] ..."
_HEADER = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+: (ERROR|CRITICAL)/[^\]]*\] ?(.*)")
_ANY_HEADER = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+: ")
_VARIABLE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|0x[0-9a-f]+|\d+", re.I
)

#: The same error this many times in the quiet window after the faults counts as
#: "kept logging the same error".
REPEATS = 3


def _entries(path: pathlib.Path) -> list[tuple[dt.datetime, str]]:
    """(time, error text with the exception's last line) of each ERROR/CRITICAL entry."""
    entries: list[tuple[dt.datetime, str]] = []
    current: list[Any] | None = None
    for line in path.read_text(errors="replace").splitlines():
        match = _HEADER.match(line)
        if match:
            current = [
                dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S"),
                match.group(3),
                "",
            ]
            entries.append(current)  # type: ignore[arg-type]
        elif _ANY_HEADER.match(line):
            current = None
        elif current is not None and line.strip():
            current[2] = line.strip()  # the last line of a traceback names the exception
    return [(at, f"{text} | {last}" if last else text) for at, text, last in entries]


def scan(log_dir: pathlib.Path, quiet_from: float) -> dict[str, Any]:
    """Errors per log, and the errors repeated in the window starting at ``quiet_from``
    (epoch seconds; log times are local)."""
    since = dt.datetime.fromtimestamp(quiet_from)
    errors: dict[str, int] = {}
    repeating: list[dict[str, Any]] = []
    for path in sorted(log_dir.glob("*.log")):
        entries = _entries(path)
        if entries:
            errors[path.stem] = len(entries)
        late = collections.Counter(
            _VARIABLE.sub("#", text)[:300] for at, text in entries if at >= since
        )
        repeating += [
            {"log": path.stem, "count": n, "error": text}
            for text, n in late.most_common()
            if n >= REPEATS
        ]
    return {"error_entries": errors, "repeating_after_faults": repeating}
