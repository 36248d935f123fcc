"""What really ran: every activity body appends one line here when it starts.

The database records attempts; it cannot know about a body that ran and whose worker
died before anything was written. The ledger lives in files (one per process, appended
with ``O_APPEND``), so it survives the database and broker faults it observes.
"""

from __future__ import annotations

import collections
import os
import pathlib

from reliability import config


def _directory() -> pathlib.Path | None:
    run_dir = os.environ.get(config.RUN_DIR_ENV)
    return pathlib.Path(run_dir) / "ledger" if run_dir else None


def record(kind: str, key: str) -> None:
    """Append ``kind key`` (one write: lines from concurrent processes never interleave)."""
    directory = _directory()
    if directory is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / f"{os.getpid()}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{kind} {key}\n".encode())
    finally:
        os.close(fd)


def counts(run_dir: pathlib.Path, kind: str) -> collections.Counter[str]:
    """How many times each key of ``kind`` was recorded."""
    found: collections.Counter[str] = collections.Counter()
    directory = run_dir / "ledger"
    if not directory.exists():
        return found
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split(" ", 1)
            if len(parts) == 2 and parts[0] == kind:
                found[parts[1]] += 1
    return found


def clear(run_dir: pathlib.Path) -> None:
    for path in (run_dir / "ledger").glob("*.log"):
        path.unlink()
