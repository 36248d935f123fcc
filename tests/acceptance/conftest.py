"""Real Celery worker subprocesses on a real Redis broker, against the test database."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection, connections

from tests import isolation
from tests.conftest import require_redis

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Worker:
    def __init__(self, process: subprocess.Popen[bytes], log: pathlib.Path) -> None:
        self.process = process
        self.log = log

    def kill(self) -> None:
        """SIGKILL the whole worker (no warm shutdown, no acks)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def broker():
    """The broker, holding none of this process's keys before and after the test (the
    worker processes started here inherit the key prefix: ``tests.isolation``)."""
    require_redis()
    isolation.delete_keys(isolation.BROKER_URL, isolation.key_prefix())
    yield isolation.BROKER_URL
    isolation.delete_keys(isolation.BROKER_URL, isolation.key_prefix())


@pytest.fixture
def start_worker(broker, tmp_path, transactional_db):
    """Start ``celery worker`` subprocesses that share this test's database."""
    if connection.vendor != "postgresql":
        pytest.skip("acceptance tests run against PostgreSQL (DW_TEST_DB=postgres)")
    workers: list[Worker] = []

    def start(
        *,
        queues: str = "celery",
        lease_seconds: int = 300,
        beat: bool = True,
        env: dict[str, str] | None = None,
        pool: str = "solo",
        concurrency: int | None = None,
    ) -> Worker:
        index = len(workers)
        log = tmp_path / f"worker-{index}.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DW_TEST_DB": "postgres",
            "DW_PG_NAME": connection.settings_dict["NAME"],
            # The engine's database when a router sends its tables there (DW_TEST_ROUTED).
            "DW_PG_ENGINE_NAME": connections["workflows"].settings_dict["NAME"],
            "DW_BROKER_URL": broker,
            "DW_ACTIVITY_LEASE_SECONDS": str(lease_seconds),
            "DW_EAGER_WORKFLOW_TASKS": "1",
            "DW_EAGER_ACTIVITIES": "1",
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        }
        if beat:
            env["DW_WORKER_BEAT"] = "1"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.celery_app",
            "worker",
            f"--pool={pool}",
            *([f"--concurrency={concurrency}"] if concurrency else []),
            *(["--concurrency=1"] if pool == "prefork" and not concurrency else []),
            "--loglevel=INFO",
            "-Q",
            queues,
            "-n",
            f"worker{index}@%h",
            "--without-gossip",
            "--without-mingle",
        ]
        if beat:
            command += ["-B", "--schedule", str(tmp_path / f"beat-{index}")]
        with log.open("wb") as handle:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(process, log)
        workers.append(worker)
        deadline = time.monotonic() + 90  # a loaded machine starts a worker slowly
        while "ready." not in worker.output():
            if process.poll() is not None or time.monotonic() > deadline:
                worker.stop()
                raise AssertionError(f"worker did not start:\n{worker.output()}")
            time.sleep(0.1)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def wait_for(predicate, *, timeout: float, interval: float = 0.1, message: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s: {message}")
        time.sleep(interval)
