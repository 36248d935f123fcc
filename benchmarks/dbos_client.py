"""Drives ``dbos_runner`` in a subprocess so its runs interleave with the engine's."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from typing import Any

from benchmarks import config, services


class DbosUnavailable(RuntimeError):
    pass


class DbosBaseline:
    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.version = ""

    def __enter__(self) -> DbosBaseline:
        try:
            import dbos  # noqa: F401
        except ImportError as exc:
            raise DbosUnavailable(
                "dbos is not installed (pip install -r benchmarks/requirements.txt)"
            ) from exc
        services.drop_database(config.DBOS_DB)
        log = (config.RESULTS_DIR / "logs" / "dbos.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.dbos_runner", config.pg_url(config.DBOS_DB)],
            cwd=config.ROOT,
            env={**os.environ, "PYTHONPATH": str(config.ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
        hello = self._read(timeout=60)
        self.version = hello.get("version", "")
        return self

    def _read(self, *, timeout: float) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise RuntimeError(f"DBOS baseline gave no answer within {timeout}s")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("DBOS baseline process exited (see results/logs/dbos.log)")
        return json.loads(line)

    def steps(self, count: int, *, timeout: float = 60) -> dict[str, Any]:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": "steps", "count": count}) + "\n")
        self.process.stdin.flush()
        return self._read(timeout=timeout)

    def __exit__(self, *exc: object) -> None:
        process = self.process
        if process is None:
            return
        try:
            if process.poll() is None and process.stdin is not None:
                process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                process.stdin.flush()
                process.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            with contextlib.suppress(Exception):  # best-effort cleanup
                services.drop_database(config.DBOS_DB)
