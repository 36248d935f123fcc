"""The async client from async views, with a real Celery worker running the workflow."""

from __future__ import annotations

import asyncio

import pytest
from django.test import AsyncClient

from tests.integration.test_async_client import get, post, run

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_async_views_drive_a_workflow_a_worker_runs(start_worker):
    start_worker()

    async def scenario() -> None:
        client = AsyncClient()
        await post(client, "/async/acc-1/start/?from=2")
        # The result is awaited from the start: its polls and the update's wait below
        # share one thread-sensitive thread, so neither may hold it while it waits.
        finishing = asyncio.ensure_future(get(client, "/async/acc-1/result/?timeout=120"))
        assert await post(client, "/async/acc-1/add/", {"amount": 5}) == {"total": 7}
        assert await get(client, "/async/acc-1/total/") == {"total": 7}
        assert not finishing.done()
        assert await post(client, "/async/acc-1/close/") == {"accepted": True}
        assert await finishing == {"output": {"total": 7, "doubled": 14}, "status": "completed"}

    run(scenario)
