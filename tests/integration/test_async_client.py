"""The awaitable client: async views driving workflows, waits that block neither the
event loop nor the thread-sensitive thread, and publishing after commit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.test import AsyncClient

from durable_workflow import (
    ActivityCompletionRejected,
    WorkflowResultTimeoutError,
    WorkflowStub,
    activity_completion,
)
from durable_workflow.models import Task
from durable_workflow.store import database
from durable_workflow.visibility import alist_runs

pytestmark = pytest.mark.django_db(transaction=True)


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``scenario`` on an event loop, as an ASGI server would (this thread stays the
    thread-sensitive one, so it shares the test's database connection)."""
    return async_to_sync(scenario)()


async def post(client: AsyncClient, path: str, body: Any = None) -> dict[str, Any]:
    response = await client.post(path, json.dumps(body or {}), content_type="application/json")
    assert response.status_code == 200, response.content
    data: dict[str, Any] = response.json()
    return data


async def get(client: AsyncClient, path: str) -> dict[str, Any]:
    response = await client.get(path)
    assert response.status_code == 200, response.content
    data: dict[str, Any] = response.json()
    return data


async def until_done(pending: asyncio.Future[Any], work: Callable[[], Any]) -> Any:
    """Play the worker (``work`` in the thread-sensitive thread) until ``pending`` is done.

    ``work`` needs the very thread the pending call's own polls use: it can only run
    because the pending call is suspended between polls, not sleeping in that thread.
    """
    while not pending.done():
        await sync_to_async(work)()
        await asyncio.sleep(0.01)
    return pending.result()


def test_async_views_start_signal_update_query_and_result(inline):
    async def scenario() -> None:
        client = AsyncClient()
        started = await post(client, "/async/view-1/start/?from=2")
        assert started["status"] == "pending" and started["run_id"]
        await sync_to_async(inline.run)()

        assert await get(client, "/async/view-1/total/") == {"total": 2}
        adding = asyncio.ensure_future(post(client, "/async/view-1/add/", {"amount": 5}))
        assert await until_done(adding, inline.run) == {"total": 7}
        assert await get(client, "/async/view-1/total/") == {"total": 7}

        assert await post(client, "/async/view-1/close/") == {"accepted": True}
        finishing = asyncio.ensure_future(get(client, "/async/view-1/result/"))
        assert await until_done(finishing, inline.run) == {
            "output": {"total": 7, "doubled": 14},
            "status": "completed",
        }
        assert await get(client, "/async/runs/") == {"instances": ["view-1"]}

    run(scenario)


def test_async_views_in_fake_mode_run_each_command_to_its_end():
    async def scenario() -> None:
        client = AsyncClient()
        await post(client, "/async/fake-1/start/?from=1")
        assert await post(client, "/async/fake-1/add/", {"amount": 4}) == {"total": 5}
        assert await get(client, "/async/fake-1/total/") == {"total": 5}
        await post(client, "/async/fake-1/close/")
        result = await get(client, "/async/fake-1/result/?timeout=0")
        assert result == {"output": {"total": 5, "doubled": 10}, "status": "completed"}

    with WorkflowStub.fake():
        run(scenario)


def test_every_twin_returns_what_its_sync_method_returns(inline):
    async def scenario() -> WorkflowStub[Any, Any]:
        stub = await WorkflowStub.amake("tests.async-tally", "twins-1")
        assert (await stub.aattempt_start(3)).accepted
        assert not (await stub.aattempt_start(3)).accepted  # already started
        await sync_to_async(inline.run)()
        assert await stub.aquery_with_arguments("total", []) == 3
        submitted = await stub.asubmit_update("add", 1)
        assert submitted.accepted and submitted.update_status == "accepted"
        await sync_to_async(inline.run)()
        inspected = await stub.ainspect_update(submitted.update_id)
        assert (inspected.update_status, inspected.result) == ("completed", 4)
        assert (await stub.aattempt_signal("close")).accepted
        await sync_to_async(inline.run)()
        await sync_to_async(inline.run)()
        await stub.await_(timeout=5)
        assert stub.status() == "completed"
        assert "WorkflowCompleted" in [e.event_type for e in await stub.ahistory()]
        by_run = await WorkflowStub.aload_run(stub.run_id())
        assert await by_run.aresult(timeout=0) == {"total": 4, "doubled": 8}
        return stub

    stub = run(scenario)
    assert stub.result(timeout=0) == {"total": 4, "doubled": 8}


def test_cancel_terminate_and_repair_twins(inline):
    async def scenario() -> None:
        first = await WorkflowStub.amake("tests.async-tally", "close-1")
        await first.astart(0)
        assert (await first.acancel("no longer needed")).accepted
        second = await WorkflowStub.amake("tests.async-tally", "close-2")
        await second.astart(0)
        assert (await second.aterminate("operator")).accepted
        assert (await second.arefresh()).status() == "terminated"
        assert (await second.aattempt_terminate()).rejected
        assert (await second.aarchive("tidy")).accepted
        assert (await second.arefresh()).archived_at() is not None
        terminated_run = second.run_id()
        rewound = await second.areset("start", reason="again")
        assert rewound.run_id is not None and second.run_id() == rewound.run_id != terminated_run
        forked = await second.afork("start", new_instance_id="close-2-fork")
        assert (await WorkflowStub.aload("close-2-fork")).run_id() == forked.run_id
        repaired = await first.arepair(reason="test")
        assert repaired.outcome
        assert (await first.adescribe()).instance_id == "close-1"

    run(scenario)


def test_aresult_waits_without_holding_the_thread_and_gives_up_at_its_timeout(inline):
    async def scenario() -> None:
        stub = await WorkflowStub.amake("tests.async-tally", "slow-1")
        await stub.astart(0)
        await sync_to_async(inline.run)()
        waiting = asyncio.ensure_future(stub.aresult(timeout=600))
        await asyncio.sleep(0.05)
        # the thread-sensitive thread that the wait polls in answers in the meantime
        assert await stub.aquery("total") == 0
        assert (await stub.asubmit_update("add", 2)).accepted
        assert not waiting.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with pytest.raises(WorkflowResultTimeoutError):
            await stub.aresult(timeout=0.1)

    run(scenario)


def test_a_cancelled_wait_unwinds_and_the_stub_goes_on(inline):
    async def scenario() -> None:
        stub = await WorkflowStub.amake("tests.async-tally", "cancel-wait-1")
        await stub.astart(0)
        await sync_to_async(inline.run)()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stub.aresult(), timeout=0.1)
        await stub.asignal("close")
        finishing = asyncio.ensure_future(stub.aresult(timeout=30))
        assert await until_done(finishing, inline.run) == {"total": 0, "doubled": 0}

    run(scenario)


def test_a_start_inside_an_open_transaction_is_sent_only_when_it_commits(inline):
    async def start_it() -> WorkflowStub[Any, Any]:
        stub = await WorkflowStub.amake("tests.async-tally", "commit-1")
        await stub.astart(1)
        return stub

    # The transaction on the engine's alias (what a routed project wraps its start in).
    with transaction.atomic(using=database.alias()):
        stub = run(start_it)
        assert stub.status() == "pending"
        assert Task.objects.filter(run_id=stub.run_id()).exists()
        assert sum(inline.sent.values()) == 0  # nothing published yet
    assert inline.sent["workflow"] == 1


def test_a_start_rolled_back_with_its_transaction_is_never_sent(inline):
    async def start_it() -> None:
        stub = await WorkflowStub.amake("tests.async-tally", "rollback-1")
        await stub.astart(1)

    with pytest.raises(RuntimeError), transaction.atomic(using=database.alias()):
        run(start_it)
        raise RuntimeError("roll back")
    assert sum(inline.sent.values()) == 0
    assert not Task.objects.exists()


def test_list_runs_twin_filters_like_list_runs(inline):
    async def scenario() -> list[str]:
        for name in ("list-a", "list-b"):
            await (await WorkflowStub.amake("tests.async-tally", name)).astart(0)
        return [run.instance_id for run in await alist_runs(workflow_type="tests.async-tally")]

    assert sorted(run(scenario)) == ["list-a", "list-b"]


def test_signal_and_update_with_start_twins(inline):
    async def scenario() -> None:
        first = await WorkflowStub.amake("tests.async-tally", "with-start-1")
        both = await first.asignal_with_start("close", start_args=[3])
        assert both.start is not None and both.start.accepted and both.signal.accepted
        finishing = asyncio.ensure_future(first.aresult(timeout=30))
        assert await until_done(finishing, inline.run) == {"total": 3, "doubled": 6}

        second = await WorkflowStub.amake("tests.async-tally", "with-start-2")
        adding = asyncio.ensure_future(
            second.aupdate_with_start("add", 4, start_args=[1], wait_timeout=30)
        )
        assert await until_done(adding, inline.run) == 5
        submitted = await second.asubmit_update_with_start("add", 1, start_args=[0])
        assert submitted.update is not None and submitted.update.accepted
        attempted = asyncio.ensure_future(
            second.aattempt_update_with_start("add", 2, start_args=[0], wait_timeout=30)
        )
        done = await until_done(attempted, inline.run)
        assert done.update is not None and done.update.result == 8

    run(scenario)


def test_activity_completion_twins_report_like_the_sync_ones():
    async def scenario() -> None:
        with pytest.raises(ActivityCompletionRejected):
            await activity_completion("not-a-token").acomplete({"approved": True})

    run(scenario)


def test_schedule_manager_twins(inline):
    from durable_workflow.schedules import ScheduleManager

    async def scenario() -> None:
        created = await ScheduleManager.acreate(
            schedule_id="async-nightly",
            workflow="tests.async-tally",
            cron_expression="0 2 * * *",
            arguments=[0],
        )
        assert created.status == "active"
        assert (await ScheduleManager.apause("async-nightly", reason="test")).status == "paused"
        assert (await ScheduleManager.aresume("async-nightly")).status == "active"
        instance_id = await ScheduleManager.atrigger("async-nightly")
        assert instance_id is not None
        assert (await WorkflowStub.aload(instance_id)).status() == "pending"
        assert [s.schedule_id for s in (await ScheduleManager.alist()).schedules] == [
            "async-nightly"
        ]
        assert (await ScheduleManager.adescribe("async-nightly")).fires_count == 1
        await ScheduleManager.adelete("async-nightly")

    run(scenario)


async def asgi_request(method: str, path: str, body: Any = None) -> dict[str, Any]:
    """One request through Django's own ASGI application, as an ASGI server sends it
    (each request in a thread-sensitive context, hence a thread, of its own)."""
    from django.core.asgi import get_asgi_application

    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    incoming = [{"type": "http.request", "body": json.dumps(body or {}).encode()}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await get_asgi_application()(scope, receive, send)
    assert sent[0]["status"] == 200, sent
    data: dict[str, Any] = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    return data


def close_connection() -> None:
    connection.close()  # this thread's connection, looked up in this thread


def test_the_async_views_under_djangos_asgi_handler(inline):
    async def scenario() -> None:
        await asgi_request("POST", "/async/asgi-1/start/?from=1")
        await sync_to_async(inline.run)()
        adding = asyncio.ensure_future(asgi_request("POST", "/async/asgi-1/add/", {"amount": 2}))
        assert await until_done(adding, inline.run) == {"total": 3}
        assert await asgi_request("GET", "/async/asgi-1/total/") == {"total": 3}
        finishing = asyncio.ensure_future(asgi_request("GET", "/async/asgi-1/result/"))
        assert await asgi_request("POST", "/async/asgi-1/close/") == {"accepted": True}
        assert await until_done(finishing, inline.run) == {
            "output": {"total": 3, "doubled": 6},
            "status": "completed",
        }

    async def closing() -> None:
        try:
            await scenario()
        finally:  # the connection of the thread-sensitive thread outside any request
            await sync_to_async(close_connection)()

    asyncio.run(closing())
