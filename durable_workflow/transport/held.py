"""Whose messages the workers hold: taken from the broker and not acknowledged yet.

A Celery worker takes a countdown message (a timer, a retry's back-off) as soon as it
is published and keeps it in memory until it is due and has run (``acks_late``). On
kombu's Redis transport such a message is then in no queue's list: it sits in the
``unacked`` hash, one hash per broker database (under ``global_keyprefix``), whatever
the queue. The repair pass asks which tasks it holds before it takes a message for
lost (``executor/repair.py``).

AMQP brokers have no such list: a passive declare counts ready messages only, and
nothing names the unacknowledged ones, so there the broker cannot say (``None``), and
the repair pass takes a message no queue holds for lost (``executor/in_flight.py``).

A broker that can name them but whose answer was not read this time (a timeout, a
connection reset or refused, an error reply) is another case: the workers may hold
any task's message, as before the failure. Answering ``None`` there made the pass
take every held timer and back-off a few seconds past due for lost and send it
again, just when the broker was struggling. The failed read answers ``UNREAD``
instead, a guess like ``EVERY``: each task's message counts as possibly held until
it has been deliverable for the pass's ``in_backlog`` bound, then it is re-sent. Not
skipping it for good keeps a lost message from waiting for ever while the read keeps
failing (a proxy or an ACL that refuses ``HSCAN`` fails every time).
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


class _Guess:
    """Held messages the broker did not name: any task's message may be among them, or
    not. ``exact`` tells the repair pass that this is a guess, so that it re-sends a
    task's message once it has been due long enough (a lost one would wait for ever)."""

    exact = False

    def __init__(self, why: str) -> None:
        self.why = why

    def __contains__(self, task_id: object) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<held: {self.why}>"


#: Held messages too many to read.
EVERY = _Guess("too many to read")
#: The read failed this time: the broker could have named them.
UNREAD = _Guess("not read")


def held(app: Any) -> Container[str] | None:
    """The ids (``str``) of the tasks whose messages the workers of the Celery ``app``'s
    broker hold unacknowledged; ``None`` when the broker can never say (not kombu's
    Redis transport), ``UNREAD`` when it could but the read failed."""
    can_name = False
    try:
        with app.connection_for_read() as conn:
            can_name = _names_held(conn.transport)
            if not can_name:
                return None
            channel: Any = conn.default_channel  # the transport's own channel class
            with channel.conn_or_acquire() as client:
                return _read(client, channel)
    except Exception as exc:
        if not can_name:  # a transport kombu cannot even load: it cannot say either
            logger.debug("could not tell whether the broker names held messages", exc_info=True)
            return None
        # Once per pass and connection: the repair pass asks each connection once.
        logger.warning(
            "could not read which messages the workers hold (%s: %s); the repair pass "
            "takes any task's message for possibly held this time",
            type(exc).__name__,
            exc,
        )
        return UNREAD


def _names_held(transport: Any) -> bool:
    """Does ``transport`` (not connected yet) keep the held messages in a hash it names?
    Asked of its channel class, so that a broker that cannot be reached is still told
    apart from one that can never say."""
    channel = getattr(transport, "Channel", None)
    return hasattr(channel, "unacked_key") and hasattr(channel, "conn_or_acquire")


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
