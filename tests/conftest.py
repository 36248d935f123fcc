"""Shared fixtures: the inline runner and service guards."""

from __future__ import annotations

import contextlib
import os
import socket

import pytest
from celery.contrib.testing.worker import test_worker_stopped
from hypothesis import settings as hypothesis_settings

from durable_workflow import clock

# No example may fail for being slow on a loaded machine, and nothing is written into
# the work tree; a failure prints its example.
hypothesis_settings.register_profile("durable_workflow", deadline=None, database=None)
hypothesis_settings.load_profile("durable_workflow")


def scaled(full: int) -> int:
    """How many examples a property test tries (or steps a long run takes): ``full``
    under ``make test-all`` (CI; ``DW_TEST_ALL=1``), a quarter (at least 5) under
    ``make test``."""
    return full if os.environ.get("DW_TEST_ALL") == "1" else max(5, full // 4)


def service_available(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_service(name: str, host: str, port: int) -> None:
    """Fail under CI, skip elsewhere, when a service the test needs is down."""
    if service_available(host, port):
        return
    message = f"{name} is not reachable at {host}:{port}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_redis(url: str | None = None) -> None:
    """Fail under CI, skip elsewhere, when the Redis at ``url`` (the broker's) is down."""
    from tests import isolation

    require_service("Redis", *isolation.host_port(url or isolation.BROKER_URL))


@pytest.fixture(autouse=True)
def _reset_clock():
    yield
    clock.reset()


@pytest.fixture(autouse=True)
def _forget_worker_lookups():
    """Routing caches registrations for a few seconds; each test starts without them."""
    from durable_workflow.executor import routing

    routing.forget()
    yield
    routing.forget()


def _in_process_worker_stopped(**kwargs):
    """Celery's in-process test worker (``celery.contrib.testing``) stops without sending
    ``worker_shutdown``; do what that signal does, so the process leaves worker mode and
    later tests run async activities inline again."""
    from durable_workflow.executor import async_attempts

    async_attempts.shutdown()


test_worker_stopped.connect(_in_process_worker_stopped, weak=False)


@pytest.fixture
def inline():
    """Route dispatches to the inline backend; call ``inline.run()`` to drain tasks."""
    from durable_workflow.executor import dispatch, sticky
    from durable_workflow.testing.inline import InlineBackend, run_ready_tasks

    backend = InlineBackend()
    previous = dispatch.set_backend(backend)
    backend.run = run_ready_tasks  # type: ignore[attr-defined]
    sticky.cache.clear()
    yield backend
    sticky.cache.clear()
    dispatch.set_backend(previous)


def pytest_collection_modifyitems(config, items):
    """With ``DW_TEST_ROUTED=1`` (the engine's tables on ``workflows``: tests/settings.py),
    every test that uses the database may use both aliases."""
    if os.environ.get("DW_TEST_ROUTED") != "1":
        return
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        marker = item.get_closest_marker("django_db")
        if marker is None and not fixtures & {"db", "transactional_db", "live_server"}:
            continue
        kwargs = dict(marker.kwargs) if marker is not None else {}
        if marker is not None and marker.args:
            kwargs["transaction"] = marker.args[0]
        if fixtures & {"transactional_db", "live_server"}:
            kwargs["transaction"] = True
        kwargs["databases"] = "__all__"
        item.add_marker(pytest.mark.django_db(**kwargs), append=False)


@pytest.fixture(autouse=True)
def _engine_statements_keep_their_order():
    """The contract of the engine's batched block (``store.roundtrips.holding``), checked
    on every statement that reaches a driver in the test's thread: none that is not the
    engine's may run while the engine holds back its ``BEGIN`` or writes (it would run
    before them, or outside the transaction). The engine flushes before it hands control
    to other code. A statement some later wrapper refuses before the driver (the guard
    against queries from a workflow body) is not run, so it breaks nothing."""
    from django.db import DatabaseError, connections

    from durable_workflow.store import roundtrips

    broken: list[str] = []

    def check(execute, sql, params, many, context):
        if not roundtrips.holding(context["connection"]):
            return execute(sql, params, many, context)
        try:
            result = execute(sql, params, many, context)
        except DatabaseError:
            broken.append(sql)
            raise
        except BaseException:
            raise  # refused before the driver
        broken.append(sql)
        return result

    with contextlib.ExitStack() as stack:
        for conn in connections.all():
            stack.enter_context(conn.execute_wrapper(check))
        yield
    assert not broken, f"statements ran while the engine held back its own: {broken}"
