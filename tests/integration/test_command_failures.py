"""A command whose transaction fails leaves nothing behind, and its caller knows
(issue 18, item 15: behind a transaction pooler client signals were lost).

The connection is killed (``pg_terminate_backend`` of this test's own backend) just
before the signal transaction's last query, after its command, signal and event rows
were sent: the caller gets the error, no half of the signal exists, and sending it
again records it exactly once.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from durable_workflow.models import HistoryEvent, WorkflowSignal
from tests.engine_db import connection
from tests.integration.helpers import start, terminate_backend

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="terminates a PostgreSQL backend"),
]


def test_a_signal_whose_transaction_dies_is_refused_whole(inline):
    stub = start("tests.approval", "killed-signal", "signal")
    inline.run()
    assert stub.refresh().status() == "waiting"
    killed: list[int] = []

    def kill_before_the_last_query(execute, sql, params, many, context):
        if 'UPDATE "durable_workflow_run"' in sql and not killed:
            killed.append(connection.connection.info.backend_pid)
            terminate_backend(killed[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(kill_before_the_last_query), pytest.raises(DatabaseError):
        stub.signal("approved-by", "ada")
    assert killed
    connection.close()  # what Django's request cycle does with a broken connection
    run_events = HistoryEvent.objects.filter(run_id=stub.run_id())
    assert not WorkflowSignal.objects.filter(run_id=stub.run_id()).exists()
    assert not run_events.filter(event_type="SignalReceived").exists()

    result = stub.signal("approved-by", "ada")  # the caller tries again
    assert result.outcome == "signal_received"
    inline.run()
    assert stub.refresh().output() == "ada"
    assert WorkflowSignal.objects.filter(run_id=stub.run_id()).count() == 1
