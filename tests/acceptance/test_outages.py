"""``--loop`` commands ride out database and broker outages (issue 30 item 1, issue 18 item 16).

Both loops used to exit with status 1 on their first database error: with the loop
not restarted, runs whose messages were consumed during the outage stayed stuck. Here
they run as real processes against a private PostgreSQL cluster (crashed with ``pg_ctl
stop -m immediate`` and started again) and a private Redis broker (killed and started
again): each logs one line when the outage starts and one when it ends, and goes on
doing its work.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from tests import isolation
from tests.acceptance import cluster
from tests.acceptance.conftest import ROOT, wait_for

#: How long one step of the outage story may take before the test gives up: a failure
#: bound, not a speed assertion, generous for a machine under load (30 s was not).
STEP = 180

pytestmark = pytest.mark.acceptance

DATABASE = "dw_outages"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Redis:
    """A private broker this test may kill."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.port = _free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self.answers, timeout=10, message="private redis did not start")

    def answers(self) -> bool:
        try:
            return self.client().ping()
        except Exception:
            return False

    def client(self):
        import redis

        return redis.Redis(port=self.port, socket_timeout=2)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def queued(self) -> int:
        return int(self.client().llen(isolation.key_prefix() + "celery"))


@pytest.fixture
def services(tmp_path):
    if not cluster.binaries_present() or not shutil_which("redis-server"):
        if os.environ.get("CI"):
            pytest.fail("initdb, pg_ctl and redis-server are needed")
        pytest.skip("initdb, pg_ctl and redis-server are needed")
    pg = cluster.Cluster()
    broker = Redis(tmp_path)
    try:
        pg.start()
        pg.create_database(DATABASE)
        broker.start()
        yield pg, broker
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
        pg.remove()


def shutil_which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def environment(pg: cluster.Cluster, broker: Redis) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DW_TEST_DB": "postgres",
        "DW_PG_PORT": str(pg.port),
        "DW_PG_NAME": DATABASE,
        "DW_BROKER_URL": f"redis://127.0.0.1:{broker.port}/0",
        "DW_LOOP_BACKOFF_SECONDS": "0.2",
        "DW_LOOP_BACKOFF_MAX_SECONDS": "1",
        "DW_REDISPATCH_MAX_BACKOFF_SECONDS": "1",
        "PYTHONPATH": str(ROOT),
    }


def django(env: dict[str, str], *arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "django", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


class Loop:
    def __init__(self, env: dict[str, str], log: pathlib.Path, *arguments: str) -> None:
        self.log = log
        with log.open("wb") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "django", *arguments],
                cwd=ROOT,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def count(self, text: str) -> int:
        return self.output().count(text)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(30)


def start_lost_workflow(env: dict[str, str], broker: Redis, instance_id: str) -> None:
    """A started run whose first message the broker then lost."""
    django(
        env,
        "shell",
        "-c",
        f"from durable_workflow import WorkflowStub; "
        f"WorkflowStub.make('tests.sequential', '{instance_id}').start('ada')",
    )
    broker.client().flushdb()


def test_repair_and_schedule_tick_loops_ride_out_a_database_crash_and_a_broker_outage(
    services, tmp_path
):
    pg, broker = services
    env = environment(pg, broker)
    django(env, "migrate", "--noinput")
    start_lost_workflow(env, broker, "outage-1")
    repair = Loop(env, tmp_path / "repair.log", "workflow_repair", "--loop", "--interval", "0.2")
    tick = Loop(env, tmp_path / "tick.log", "schedule_tick", "--loop", "--interval", "0.2")
    try:
        wait_for(lambda: broker.queued() >= 1, timeout=STEP, message="the lost message re-sent")
        wait_for(lambda: tick.count("schedule action(s)") >= 1, timeout=STEP, message="a tick")

        pg.crash()  # every connection of both loops dies at once
        wait_for(
            lambda: repair.count("workflow_repair: pass failed") == 1,
            timeout=STEP,
            message=repair.output(),
        )
        wait_for(
            lambda: tick.count("schedule_tick: pass failed") == 1,
            timeout=STEP,
            message=tick.output(),
        )
        time.sleep(2)  # several failed passes while the database is away ...
        assert repair.alive() and tick.alive(), repair.output() + tick.output()
        assert repair.count("pass failed") == 1 and tick.count("pass failed") == 1  # ... one line

        pg.start()
        wait_for(
            lambda: repair.count("workflow_repair: recovered after") == 1,
            timeout=STEP,
            message=repair.output(),
        )
        wait_for(
            lambda: tick.count("schedule_tick: recovered after") == 1,
            timeout=STEP,
            message=tick.output(),
        )
        start_lost_workflow(env, broker, "outage-2")  # the loop still does its work
        wait_for(lambda: broker.queued() >= 1, timeout=STEP, message="re-sent after recovery")

        broker.kill()  # the repair pass cannot re-send the still unclaimed tasks
        wait_for(lambda: repair.count("pass failed") == 2, timeout=STEP, message=repair.output())
        assert "BrokerUnavailable" in repair.output()
        broker.start()
        wait_for(
            lambda: repair.count("recovered after") == 2, timeout=STEP, message=repair.output()
        )
        wait_for(lambda: broker.queued() >= 1, timeout=STEP, message="re-sent after the broker")
        assert repair.alive() and tick.alive()
    finally:
        repair.stop()
        tick.stop()
