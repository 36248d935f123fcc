"""How many of the messages workers handle under a backlog are repair duplicates?

Starts ``--runs`` workflows of ``--steps`` activities at once (a backlog in the
broker), then ``--workers`` solo Celery workers and ``workflow_repair --loop`` with
the production repair settings (``REDISPATCH_AFTER_SECONDS`` 3, ``REPAIR_INTERVAL_
SECONDS`` 5), waits until every run completed, and counts in the workers' logs the
engine messages handled and those that found their task taken already ("skipped"):
a message the repair pass sent although the first one was still waiting.

    python reliability/repair_duplicates.py --runs 200 --steps 5 --workers 2
    python reliability/repair_duplicates.py --code /path/to/older/checkout   # before

Needs the local PostgreSQL and a Redis; it creates (and drops) its own database,
and its broker keys carry a prefix of their own (deleted at the end). It measures;
it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
HANDLED = re.compile(
    r"Task durable_workflow\.(workflow_task|activity_task|timer_task)\[[^\]]+\] "
    r"succeeded in [0-9.e-]+s: '(\w+)'"
)
SETTINGS = """
from tests.settings import *  # noqa: F403

DURABLE_WORKFLOW = {{
    **DURABLE_WORKFLOW,  # noqa: F405
    "REDISPATCH_AFTER_SECONDS": 3,
    "REDISPATCH_MAX_BACKOFF_SECONDS": 300,
    "REPAIR_INTERVAL_SECONDS": 5.0,
    "EAGER_ACTIVITIES": {eager},
    "EAGER_WORKFLOW_TASKS": {eager},
}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--database", default="dw_reliability_duplicates")
    parser.add_argument("--code", default=str(ROOT), help="checkout whose engine runs")
    parser.add_argument("--no-eager", action="store_true", help="every step through the broker")
    options = parser.parse_args()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="dw-duplicates-"))
    (scratch / "duplicates_settings.py").write_text(SETTINGS.format(eager=not options.no_eager))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "duplicates_settings",
        "DW_TEST_DB": "postgres",
        "DW_PG_NAME": options.database,
        "DW_BROKER_URL": options.broker,
        # One broker key prefix for every process started here (tests.isolation, where
        # the checkout has it).
        "DW_TEST_RUN": f"duplicates-{os.getpid()}",
        "PYTHONPATH": f"{scratch}:{options.code}",
    }
    _database(options.database, create=True)
    try:
        report = _measure(options, env, scratch)
    finally:
        _database(options.database, create=False)
    print(report)


def _database(name: str, *, create: bool) -> None:
    import psycopg

    with psycopg.connect(host="127.0.0.1", user="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')


def _django(env: dict[str, str], code: str, *arguments: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "django", *arguments],
        cwd=code,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _measure(options: argparse.Namespace, env: dict[str, str], scratch: pathlib.Path) -> str:
    _django(env, options.code, "migrate", "--noinput")
    _django(
        env,
        options.code,
        "shell",
        "-c",
        (
            "from durable_workflow import WorkflowStub\n"
            f"for n in range({options.runs}):\n"
            f"    WorkflowStub.make('tests.many-steps', f'dup-{{n}}').start({options.steps})\n"
        ),
    )
    processes = []
    logs = []
    for index in range(options.workers):
        log = scratch / f"worker-{index}.log"
        logs.append(log)
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "tests.celery_app",
                    "worker",
                    "--pool=solo",
                    "--loglevel=INFO",
                    "-Q",
                    "celery",
                    "-n",
                    f"dup{index}@%h",
                    "--without-gossip",
                    "--without-mingle",
                ],
                cwd=options.code,
                env=env,
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    processes.append(
        subprocess.Popen(
            [sys.executable, "-m", "django", "workflow_repair", "--loop"],
            cwd=options.code,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    )
    started = time.monotonic()
    try:
        while _open_runs(env, options.code) and time.monotonic() - started < 1800:
            time.sleep(2)
        elapsed = time.monotonic() - started
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            process.wait(60)
    _forget_broker_keys(options.broker, env["DW_TEST_RUN"])
    outcomes: dict[str, int] = {}
    for log in logs:
        for _, outcome in HANDLED.findall(log.read_text(errors="replace")):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    handled = sum(outcomes.values())
    skipped = outcomes.get("skipped", 0)
    share = skipped / handled if handled else 0.0
    return (
        f"{options.runs} runs x {options.steps} steps, {options.workers} solo workers, "
        f"eager {'off' if options.no_eager else 'on'}: {handled} messages handled, "
        f"{skipped} duplicates skipped ({share:.1%}), all runs closed in {elapsed:.0f} s; "
        f"outcomes {dict(sorted(outcomes.items()))}"
    )


def _forget_broker_keys(url: str, run: str) -> None:
    """Delete this measurement's keys (its own prefix; nothing else on the broker)."""
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"dw-test-{run}-*", count=1000))
    if keys:
        client.delete(*keys)


def _open_runs(env: dict[str, str], code: str) -> bool:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "django",
            "shell",
            "-c",
            "from durable_workflow.models import WorkflowRun\n"
            "print(WorkflowRun.objects.exclude(status='completed').count())",
        ],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1]) > 0


if __name__ == "__main__":
    main()
