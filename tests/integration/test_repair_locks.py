"""The repair pass never waits on a row a workflow task holds (issue 18, item 14).

Its multi-row update of the tasks it re-sent took their rows in scan order, without
their runs' locks; a workflow task that held one of them and wanted another (a child
waking its parent) made a lock cycle: ``deadlock detected ... relation
"durable_workflow_task"``.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from durable_workflow import clock
from durable_workflow.models import Task
from durable_workflow.store import database, tasks
from tests.engine_db import connection
from tests.integration.helpers import start

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are PostgreSQL's"),
]


def test_marking_re_sent_tasks_skips_a_row_a_workflow_task_holds(inline):
    first = Task.objects.get(run_id=start("tests.sequential", "locks-1", "ada").run_id())
    second = Task.objects.get(run_id=start("tests.sequential", "locks-2", "bob").run_id())
    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def workflow_task_holding_the_second_row():
        try:
            with database.atomic():
                Task.objects.filter(id=second.id).select_for_update().get()
                held.set()
                release.wait(30)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=workflow_task_holding_the_second_row)
    thread.start()
    try:
        assert held.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")  # waiting on the row fails the test
        tasks.mark_dispatched([second.id, first.id], now=clock.now())
    finally:
        release.set()
        done.wait(30)
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    counts = dict(
        Task.objects.filter(id__in=[first.id, second.id]).values_list("id", "dispatch_count")
    )
    assert counts == {first.id: 2, second.id: 1}  # the held row is left as it is
