"""Sticky (warm) execution gives the same histories as cold replay, and reads only the tail."""

from __future__ import annotations

from collections import Counter

import pytest
from django.test import override_settings

from durable_workflow.executor import sticky
from tests import sql_text
from tests.engine_db import connection
from tests.integration.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

# (workflow, args, exact): parallel members may start in either order in separate runs,
# so groups compare as multisets of events; sequential ones must match exactly.
SCENARIOS = [
    ("tests.many-steps", (12,), True),
    ("tests.booking", (4,), True),
    ("tests.nested", (), False),
    ("tests.selector", (3600,), False),
    ("tests.async-branches", (), False),
]


def shape(stub):
    volatile = {
        "activity_execution_id",
        "activity_attempt_id",
        "task_id",
        "timer_id",
        "fire_at",
        "fired_at",
        "lease_expires_at",
        "lease_owner",
        "child_call_id",
        "child_workflow_run_id",
        "child_instance_id",
        "failure_id",
        "workflow_run_id",
        "retry_task_id",
        "command_id",
        "workflow_instance_id",
    }
    return [
        (e.event_type, {k: v for k, v in e.payload.items() if k not in volatile})
        for e in stub.history()
    ]


@pytest.mark.parametrize(("workflow", "args", "exact"), SCENARIOS)
def test_warm_and_cold_execution_write_the_same_history(inline, workflow, args, exact):
    with override_settings(DURABLE_WORKFLOW={"STICKY_ENABLED": False}):
        cold = start(workflow, "cold", *args)
        inline.run()
    hits_before = sticky.cache.stats.hits
    warm = start(workflow, "warm", *args)
    inline.run()
    assert sticky.cache.stats.hits > hits_before
    assert warm.refresh().output() == cold.refresh().output()
    if exact:
        assert shape(warm) == shape(cold)
    else:
        assert Counter(e for e, _ in shape(warm)) == Counter(e for e, _ in shape(cold))


def test_a_sticky_hit_reads_only_the_new_events(inline):
    stub = start("tests.many-steps", "tail-1", 40)
    rows_read = []

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql_text.kinds(sql)[-1] == ("SELECT", "durable_workflow_history_event"):
            rows_read.append(context["cursor"].rowcount)
        return result

    with connection.execute_wrapper(wrapper):
        inline.run()
    assert stub.refresh().output() == sum(range(40))
    # cold: every task would read the whole log (~60 rows on average); warm reads a few
    assert max(rows_read) < 10, rows_read


def test_eager_workflow_tasks_skip_the_broker_and_hit_the_warm_body(inline):
    from django.test import override_settings

    with override_settings(DURABLE_WORKFLOW={"EAGER_WORKFLOW_TASKS": True}):
        hits = sticky.cache.stats.hits
        stub = start("tests.many-steps", "eager-1", 10)
        inline.run()
    assert stub.refresh().output() == sum(range(10))
    # one published workflow task (the start); every other one ran eagerly and warm
    assert inline.sent["workflow"] == 1
    assert sticky.cache.stats.hits - hits >= 10


def _gate(version: str) -> type:
    """The same workflow class (same module and name) as two deploys would define it."""
    import durable_workflow as dw
    from durable_workflow import Workflow

    class RedeployedGate(Workflow):
        type_key = "tests.sticky-redeployed-gate"
        signals = ["go"]

        def handle(self) -> str:
            dw.wait_signal("go")
            return version

    return RedeployedGate


def test_a_warm_body_of_a_replaced_class_is_replayed_cold_on_the_new_one(inline):
    _gate("first")
    stub = start("tests.sticky-redeployed-gate", "redeployed-1")
    inline.run()  # the body waits, warm, as the first class wrote it
    _gate("second")  # the class registered under the key is replaced in this process
    stub.signal("go")
    inline.run()
    assert stub.refresh().output() == "second"
