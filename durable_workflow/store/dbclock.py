"""The database server's clock, which the engine's due decisions follow.

Timers, leases and retry back-offs are written by one process and judged by
another. If each judged by its own clock, a worker whose clock runs ahead would fire
timers early and take leases that have not expired. A worker process therefore
anchors the engine clock (``durable_workflow.clock``) to the database's: one query
when it registers and one per heartbeat, never one per step. Between two anchors it
counts with the monotonic clock, so a step of the machine's clock changes nothing.
"""

from __future__ import annotations

import datetime as dt
import time

from django.db import DatabaseError, connections, router

from durable_workflow import clock
from durable_workflow.logs import get_logger
from durable_workflow.models import WorkflowRun
from durable_workflow.store import roundtrips

logger = get_logger("durable_workflow")

#: Loops re-anchor at most this often (workers do it with each heartbeat).
REANCHOR_SECONDS = 10.0


def database_now(alias: str | None = None) -> dt.datetime:
    """The database server's current time (one query); ``NotImplementedError`` on a
    backend the engine cannot ask."""
    conn = connections[alias or router.db_for_write(WorkflowRun) or "default"]
    with roundtrips.orm(), conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute("SELECT clock_timestamp()")
        elif conn.vendor == "sqlite":
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        elif conn.vendor == "mysql":
            cursor.execute("SELECT UTC_TIMESTAMP(6)")
        else:
            raise NotImplementedError(conn.vendor)
        # A timestamp from PostgreSQL and MySQL, ISO text from SQLite.
        value: dt.datetime | str = cursor.fetchone()[0]
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def follow_database_clock() -> bool:
    """Anchor this process's engine clock to the database's now; ``False`` (this
    machine's clock, or the last anchor, stays in use) when the database cannot say.
    A failure is logged once, not once per attempt, until an anchor succeeds again."""
    try:
        at = database_now()
    except (DatabaseError, NotImplementedError) as exc:
        if not _state["failing"]:
            logger.warning("could not read the database's clock (%s); the engine clock stays", exc)
        _state["failing"] = True
        return False
    clock.anchor(at, time.monotonic())  # read after the answer came: never ahead
    _state["failing"] = False
    return True


_state = {"failing": False}


def keep_following(max_age: float = REANCHOR_SECONDS) -> None:
    """Re-anchor when the last anchor is older than ``max_age`` seconds (or missing)."""
    age = clock.anchor_age()
    if age is None or age >= max_age:
        follow_database_clock()
