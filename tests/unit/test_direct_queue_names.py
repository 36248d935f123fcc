"""A worker's direct queue: a name every transport accepts, and one line where none can."""

from __future__ import annotations

import logging
import re
import types

import pytest
from kombu import Connection, Exchange, Producer, Queue
from kombu.exceptions import ChannelError

from durable_workflow.transport import worker
from durable_workflow.transport.worker import direct_queue_name

NODES = ["example-29933@vm", "celery@host.example.com", "gpu1@host-a", "w" * 300 + "@h", "ü@ß"]
#: SQS's rule, the strictest of Kombu's transports (it also covers the filesystem's).
STRICTEST = re.compile(r"\A[A-Za-z0-9_-]{1,80}\Z")


@pytest.mark.parametrize("node", NODES)
def test_every_transport_accepts_the_name(node):
    name = direct_queue_name(node)
    assert STRICTEST.match(name), name
    assert name.startswith("dw-direct-")


def test_names_keep_nodes_apart_even_when_cut_short():
    long_a, long_b = "w" * 300 + "@a", "w" * 300 + "@b"
    names = {direct_queue_name(node) for node in [*NODES, long_a, long_b, "gpu1@host.a"]}
    assert len(names) == len(NODES) + 3


def test_the_filesystem_broker_declares_and_delivers_on_it(tmp_path):
    """The transport of ``make example`` refused ``dw.direct.example-…@vm`` (issue 22)."""
    folders = {
        "data_folder_in": str(tmp_path / "queue"),
        "data_folder_out": str(tmp_path / "queue"),
        "control_folder": str(tmp_path / "control"),
    }
    for folder in folders.values():
        (tmp_path / folder).mkdir(exist_ok=True)
    # What Celery's add_task_queue declares: a direct exchange named like the queue.
    for name, accepted in [
        (direct_queue_name("example-29933@vm"), True),
        ("dw.direct.example-29933@vm", False),  # the name before issue 22
    ]:
        with Connection("filesystem://", transport_options=folders) as connection:
            exchange = Exchange(name, type="direct")
            queue = Queue(name, exchange, routing_key=name)(connection.default_channel)
            if not accepted:
                with pytest.raises(ChannelError, match="Invalid exchange name"):
                    queue.declare()
                continue
            queue.declare()
            Producer(connection.default_channel).publish(
                "hello", exchange=exchange, routing_key=name
            )
            message = queue.get(no_ack=True)
            assert message is not None and message.payload == "hello"


def test_a_transport_that_cannot_route_logs_one_line_without_a_traceback(caplog, monkeypatch):
    def refuse(queue):
        raise ChannelError(f"Invalid exchange name: {queue!r}")

    consumer = types.SimpleNamespace(add_task_queue=refuse, task_consumer=None, controller=None)
    monkeypatch.setitem(worker._state, "direct_queue", "dw-direct-x")
    monkeypatch.setitem(worker._state, "queues", ["celery"])
    monkeypatch.setattr(worker, "register", lambda queues: None)
    with caplog.at_level(logging.WARNING, logger="durable_workflow"):
        worker._on_worker_ready(sender=consumer)
    [record] = [r for r in caplog.records if r.name.startswith("durable_workflow")]
    assert record.exc_info is None and "\n" not in record.getMessage()
    assert "shared queues" in record.getMessage()
    assert worker._state["direct_queue"] is None
