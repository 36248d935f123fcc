"""Whose messages the workers hold: taken from the broker and not acknowledged yet.

A Celery worker takes a countdown message (a timer, a retry's back-off) as soon as it
is published and keeps it in memory until it is due and has run (``acks_late``). On
kombu's Redis transport such a message is then in no queue's list: it sits in the
``unacked`` hash, one hash per broker database (under ``global_keyprefix``), whatever
the queue. The repair pass asks which tasks it holds before it takes a message for
lost (``executor/repair.py``).

AMQP brokers have no such list: a passive declare counts ready messages only, and
nothing names the unacknowledged ones, so there the broker cannot say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from typing import Any

from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")

#: At most this many held messages are read to learn whose they are. A broker that
#: holds more is taken to hold every task's message, for a while: reading it would
#: cost each repair pass more than the duplicates it saves.
READ_LIMIT = 20_000

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class _Every:
    """Held messages too many to read: any task's message may be among them, or not.
    ``exact`` tells the repair pass that this is a guess, so that it re-sends a task's
    message once it has been due long enough (a lost one would wait for ever)."""

    exact = False

    def __contains__(self, task_id: object) -> bool:
        return True


EVERY = _Every()


def held(app: Any) -> Container[str] | None:
    """The ids (``str``) of the tasks whose messages the workers of the Celery ``app``'s
    broker hold unacknowledged; ``None`` when the broker cannot say (not kombu's Redis
    transport, or unreachable)."""
    try:
        with app.connection_for_read() as conn:
            channel: Any = conn.default_channel  # the transport's own channel class
            if not hasattr(channel, "unacked_key") or not hasattr(channel, "conn_or_acquire"):
                return None
            with channel.conn_or_acquire() as client:
                return _read(client, channel)
    except Exception:  # unreachable, or a transport that cannot list them
        logger.debug("could not read the messages workers hold", exc_info=True)
        return None


def _read(client: Any, channel: Any) -> Container[str]:
    # kombu's client prefixes the keys of the commands it knows (HLEN among them), not
    # HSCAN's: that key is prefixed here unless the client would do it itself.
    if client.hlen(channel.unacked_key) > READ_LIMIT:
        return EVERY
    key = channel.unacked_key
    prefix = getattr(client, "global_keyprefix", "")
    if prefix and "HSCAN" not in getattr(client, "PREFIXED_SIMPLE_COMMANDS", ()):
        key = prefix + key
    ids: set[str] = set()
    for _tag, value in client.hscan_iter(key, count=1000):
        ids.update(_task_ids(value))
    return frozenset(ids)


def _task_ids(value: bytes | str) -> list[str]:
    """The task ids a held message carries: kombu stores ``[payload, exchange,
    routing_key]``, and Celery puts the arguments' repr in the payload's headers
    (the engine's tasks take one argument, the task id)."""
    try:
        payload = json.loads(value)[0]
        return _UUID.findall(str(payload["headers"].get("argsrepr") or ""))
    except (ValueError, LookupError, TypeError, AttributeError):
        return []
