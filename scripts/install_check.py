"""Install the built wheel as users do, with each documented extra, and run a worker.

    .venv/bin/python scripts/install_check.py [--only NAME]

Builds the wheel, then for each case below follows docs/quickstart.md from an empty
directory (``tests/docs/quickstart.py``): a new virtualenv, ``pip install`` of the wheel
with the case's extras, ``django-admin startproject``, a ``celery worker`` against the
case's broker, and the page's workflow run to completion. Needs Redis (127.0.0.1:6379),
RabbitMQ (127.0.0.1:5672, guest/guest) and PostgreSQL (127.0.0.1:5432, user postgres)
and the package registry. ``.ci/run`` runs it after the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
REDIS = os.environ.get("DW_INSTALL_CHECK_REDIS", "redis://127.0.0.1:6379/15")
RABBITMQ = os.environ.get("DW_INSTALL_CHECK_AMQP", "amqp://guest:guest@127.0.0.1:5672//")
POSTGRES_DATABASE = f"dw_install_check_{os.getpid()}"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    extras: str  # what replaces the quickstart's "[redis]"; "" installs no extra
    broker: str
    postgres: bool = False
    settings: str = ""  # appended to the quickstart's settings.py


#: The encryption extra, used: the quickstart's payloads compressed and encrypted (a fixed
#: throwaway key) on their way through a real worker.
ENCRYPTION_SETTINGS = (
    "DURABLE_WORKFLOW = {**DURABLE_WORKFLOW, 'PAYLOAD_CODECS': ['zlib', 'aes-gcm'], "
    "'PAYLOAD_ENCRYPTION_KEYS': {'install-check': 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8='}}"
)

#: The prometheus extra, used: the engine records its metrics while the quickstart's workflow
#: runs through a real worker (the recorder and the Celery hook come from the installed wheel).
PROMETHEUS_SETTINGS = "DURABLE_WORKFLOW = {**DURABLE_WORKFLOW, 'PROMETHEUS_METRICS': True}"

#: The otel extra, used: the tracing interceptor wraps the quickstart's commands, workflow
#: tasks and activities in the worker, with opentelemetry-api alone (its no-op tracer).
OTEL_SETTINGS = (
    "DURABLE_WORKFLOW = {**DURABLE_WORKFLOW, 'INTERCEPTORS': "
    "['durable_workflow.contrib.opentelemetry.TracingInterceptor']}"
)

CASES = [
    Case("redis-extra-on-redis", "redis", REDIS),  # the quickstart as written
    Case("no-extra-on-rabbitmq", "", RABBITMQ),  # AMQP needs no extra
    Case("postgres-and-redis-extras-on-postgresql", "postgres,redis", REDIS, postgres=True),
    Case("encryption-extra-on-redis", "redis,encryption", REDIS, settings=ENCRYPTION_SETTINGS),
    Case("prometheus-extra-on-redis", "redis,prometheus", REDIS, settings=PROMETHEUS_SETTINGS),
    Case("otel-extra-on-redis", "redis,otel", REDIS, settings=OTEL_SETTINGS),
]


def build_wheel(into: pathlib.Path) -> pathlib.Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into), "."],
        cwd=ROOT,
        check=True,
    )
    (wheel,) = into.glob("durable_workflow-*.whl")
    return wheel


def postgres_settings() -> str:
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", POSTGRES_DATABASE], check=True)
    return (
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.postgresql', "
        f"'NAME': {POSTGRES_DATABASE!r}, 'USER': 'postgres', 'HOST': '127.0.0.1'}}}}"
    )


def run_case(case: Case, wheel: pathlib.Path, scratch: pathlib.Path) -> bool:
    settings = (postgres_settings() if case.postgres else "") + "\n" + case.settings
    started = time.monotonic()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.docs.quickstart",
                str(scratch),
                "--install",
                str(wheel),
                "--extras",
                case.extras,
                "--broker",
                case.broker,
                "--settings",
                settings,
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        if case.postgres:
            subprocess.run(
                ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", POSTGRES_DATABASE],
                check=False,
            )
    seconds = time.monotonic() - started
    extras = f"[{case.extras}]" if case.extras else "(no extra)"
    if done.returncode == 0:
        print(f"install check {case.name}: ok, {extras} on {case.broker} ({seconds:.0f} s)")
        return True
    print(f"install check {case.name}: FAILED, {extras} on {case.broker}\n{done.stderr[-8000:]}")
    return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", choices=[case.name for case in CASES], action="append")
    options = parser.parse_args(argv)
    cases = [case for case in CASES if not options.only or case.name in options.only]
    with tempfile.TemporaryDirectory(prefix="dw-install-check-") as tmp:
        work = pathlib.Path(tmp)
        wheel = build_wheel(work / "dist")
        print(f"install check: built {wheel.name}")
        results = [run_case(case, wheel, work / case.name) for case in cases]
    failed = results.count(False)
    print(f"install check: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
