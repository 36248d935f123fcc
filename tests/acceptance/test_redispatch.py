"""The repair pass re-sends only messages that are lost, not ones waiting their turn
(issue 30, item 4).

Under a backlog the pass re-sent every ready task whose message was a few seconds
old: in one run 1,629 of 2,627 messages workers handled were such duplicates, each
found its task taken and skipped. Now a message is presumed in flight while the
broker holds messages in its queue (until ``REDISPATCH_MAX_BACKOFF_SECONDS``), and
lost, re-sent, once that queue is empty. A real Redis broker; no worker consumes.
"""

from __future__ import annotations

import datetime as dt

import pytest
import redis

from durable_workflow import WorkflowStub, clock, executor
from durable_workflow.executor import dispatch
from durable_workflow.models import Task
from tests import isolation

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


QUEUE = isolation.key_prefix() + "celery"  # the Redis list of this process's queue


@pytest.fixture
def celery_backend(broker):
    previous = dispatch.set_backend(None)  # the Celery backend, publishing to ``broker``
    yield redis.Redis.from_url(broker)
    dispatch.set_backend(previous)


def test_a_message_waiting_in_a_backlog_is_not_sent_twice(celery_backend):
    stubs = [WorkflowStub.make("tests.sequential", f"backlog-{n}") for n in range(3)]
    for stub in stubs:
        stub.start("ada")
    assert celery_backend.llen(QUEUE) == 3  # three messages wait; no worker runs
    clock.advance(dt.timedelta(seconds=60))  # well past REDISPATCH_AFTER_SECONDS
    assert executor.repair_pass().redispatched == 0  # they are in the queue: in flight
    assert celery_backend.llen(QUEUE) == 3

    celery_backend.delete(QUEUE)  # the broker loses them (a restart without persistence)
    clock.advance(dt.timedelta(seconds=60))
    assert executor.repair_pass().redispatched == 3  # nothing waits: they are lost
    assert celery_backend.llen(QUEUE) == 3

    clock.advance(dt.timedelta(seconds=301))  # past REDISPATCH_MAX_BACKOFF_SECONDS (300)
    assert executor.repair_pass().redispatched == 3  # a backlog that never drains
    assert set(Task.objects.values_list("dispatch_count", flat=True)) == {3}
