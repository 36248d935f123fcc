"""Celery worker subprocesses for the benchmarks: started in their own process
group, always stopped (SIGTERM, then SIGKILL of the whole group)."""

from __future__ import annotations

import atexit
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from benchmarks import config

_LIVE: set[subprocess.Popen[bytes]] = set()


def _kill_all_at_exit() -> None:
    for process in list(_LIVE):
        _stop(process, grace=2)


atexit.register(_kill_all_at_exit)


def _stop(process: subprocess.Popen[bytes], *, grace: float = 15) -> None:
    try:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    except ProcessLookupError:
        pass
    finally:
        _LIVE.discard(process)


class Worker:
    def __init__(self, process: subprocess.Popen[bytes], log: pathlib.Path, name: str) -> None:
        self.process = process
        self.log = log
        self.name = name

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_kb(self) -> int:
        """VmRSS of the worker process (solo pool: the process that runs tasks)."""
        for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError(f"no VmRSS for pid {self.pid}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        _stop(self.process)


def _start_one(index: int, log_dir: pathlib.Path, *, timeout: float = 60) -> Worker:
    name = f"bench{index}"
    log = log_dir / f"worker-{name}.log"
    ready = pathlib.Path(tempfile.mkdtemp(prefix="dw-bench-")) / "ready"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(config.ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "DW_BENCH_READY_FILE": str(ready),
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "benchmarks.celery_app",
        "worker",
        "--pool=solo",
        os.environ.get("DW_BENCH_WORKER_LOGLEVEL", "--loglevel=WARNING"),
        "-Q",
        "celery",
        "-n",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    with log.open("ab") as handle:
        process = subprocess.Popen(
            command,
            cwd=config.ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    _LIVE.add(process)
    worker = Worker(process, log, name)
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if not worker.alive() or time.monotonic() > deadline:
            worker.stop()
            raise RuntimeError(f"celery worker {name} did not start:\n{worker.tail()}")
        time.sleep(0.05)
    return worker


@contextlib.contextmanager
def running_workers(count: int = 2) -> Iterator[list[Worker]]:
    """``count`` solo-pool workers consuming the default queue; stopped on exit."""
    log_dir = config.RESULTS_DIR / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    workers: list[Worker] = []
    try:
        for index in range(count):
            workers.append(_start_one(index, log_dir))
        yield workers
    finally:
        for worker in workers:
            worker.stop()


def check_alive(workers: list[Worker]) -> None:
    for worker in workers:
        if not worker.alive():
            raise RuntimeError(f"worker {worker.name} died:\n{worker.tail()}")
