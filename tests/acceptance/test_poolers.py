"""Behind PgBouncer in transaction mode (issue 18, item 15).

Without Django's ``DISABLE_SERVER_SIDE_CURSORS``, the engine's SQL-level prepared
statements met server sessions other than the ones they were prepared in (``prepared
statement ... does not exist`` / ``already exists``) and client signals were lost.
The engine now sees the pooler (the server process is not the one the driver was
told of) and sends its statements unprepared on such connections; ``manage.py
check --database`` and the doctor name the setting. Real PgBouncer, real workers,
real client processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.db import connection

from durable_workflow import WorkflowStub
from durable_workflow.models import WorkflowSignal
from tests.acceptance import pooler
from tests.acceptance.conftest import ROOT

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

CLIENTS = 3
RUNS = 6
PINGS = 5  # each run waits for five pings (tests.approval, mode "many")


@pytest.fixture
def bouncer():
    if not pooler.present():
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed")
        pytest.skip("pgbouncer is not installed")
    if connection.vendor != "postgresql":
        pytest.skip("PgBouncer pools PostgreSQL connections")
    instance = pooler.PgBouncer(mode="transaction", pool_size=2)
    yield instance
    instance.stop()


def through(bouncer: pooler.PgBouncer, **more: str) -> dict[str, str]:
    """Environment of a process whose database connections go through the pooler."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DW_TEST_DB": "postgres",
        "DW_PG_NAME": connection.settings_dict["NAME"],
        "DW_PG_PORT": str(bouncer.port),
        "PYTHONPATH": str(ROOT),
        **more,
    }


def django(env: dict[str, str], *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "django", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_check_and_doctor_name_the_setting_behind_a_pooler(bouncer):
    done = django(through(bouncer), "check", "--database", "default")
    assert "durable_workflow.W020" in done.stderr + done.stdout
    assert "DISABLE_SERVER_SIDE_CURSORS" in done.stderr + done.stdout
    doctor = django(through(bouncer), "workflow_doctor", "--json", check=False)
    [found] = [c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "connection_pooler"]
    assert found["status"] == "warning" and found["details"]["pooler"] is True
    assert "DISABLE_SERVER_SIDE_CURSORS" in found["next_step"]
    flagged = through(bouncer, DW_PG_POOLER_FLAG="1")
    done = django(flagged, "check", "--database", "default")
    assert "W020" not in done.stderr + done.stdout
    direct = django({**through(bouncer), "DW_PG_PORT": "5432"}, "check", "--database", "default")
    assert "W020" not in direct.stderr + direct.stdout


SEND = """
import json, sys
from durable_workflow import WorkflowStub
outcomes = []
for instance_id, value in json.loads(sys.argv[-1]):
    try:
        result = WorkflowStub.load(instance_id).signal("ping", value)
        outcomes.append([value, result.outcome])
    except Exception as exc:
        outcomes.append([value, type(exc).__name__ + ": " + str(exc).splitlines()[0]])
print(json.dumps(outcomes))
"""


def test_signals_through_a_transaction_pooler_arrive_exactly_once(bouncer, start_worker):
    for _ in range(2):
        start_worker(env={"DW_PG_PORT": str(bouncer.port), "DW_EAGER_ACTIVITIES": "0"})
    stubs = []
    for index in range(RUNS):
        stub = WorkflowStub.make("tests.approval", f"pooled-{index}")
        stub.start("many")
        stubs.append(stub)
    pings = [(f"pooled-{index}", f"{index}-{n}") for index in range(RUNS) for n in range(PINGS)]
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import django; django.setup()\n{SEND}",
                json.dumps(pings[i::CLIENTS]),
            ],
            cwd=ROOT,
            env=through(bouncer),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(CLIENTS)
    ]
    outcomes = []
    for client in clients:
        out, err = client.communicate(timeout=300)
        assert client.returncode == 0, err
        outcomes += json.loads(out.strip().splitlines()[-1])
    assert {outcome for _, outcome in outcomes} == {"signal_received"}, outcomes
    for stub in stubs:
        stub.wait(timeout=120)
        assert stub.refresh().status() == "completed", stub.status()
        assert sorted(stub.output()) == sorted(v for i, v in pings if i == stub.id())
    assert WorkflowSignal.objects.count() == len(pings)  # nothing lost, nothing twice
