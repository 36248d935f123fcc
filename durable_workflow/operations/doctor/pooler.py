"""Is the engine's database reached through a connection pooler, and is that set up right?

A pooler that lends a server session per transaction (PgBouncer's ``transaction``
mode) breaks everything that lives in a session: SQL-level prepared statements
(the engine turns its own off for such connections by itself) and Django's
server-side cursors (``DISABLE_SERVER_SIDE_CURSORS`` must be set). From the
client side a pooler shows as a server process other than the one the driver
connected to; its pool mode does not show, so the advice covers both modes.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connections

from durable_workflow.store import database, prepared

#: What to do about a pooler whose connections keep server-side cursors on.
ADVICE = (
    "If the pooler lends server sessions per transaction (PgBouncer pool_mode = "
    "transaction), set DATABASES[{alias!r}]['DISABLE_SERVER_SIDE_CURSORS'] = True. The "
    "engine already sends its statements unprepared on these connections "
    "(DURABLE_WORKFLOW['PREPARED_STATEMENTS'] is ignored for them). In session mode give "
    "each worker process its own server connection (docs: deploying workers, PgBouncer)."
)


def engine_alias() -> str:
    return database.alias()


def finding(alias: str) -> dict[str, Any] | None:
    """What a look at ``alias`` shows: ``None`` when it is no PostgreSQL database or
    cannot be reached, else whether a pooler is in between and the cursor setting."""
    conn = connections[alias]
    if conn.vendor != "postgresql":
        return None
    try:
        pooled = prepared.behind_pooler(conn)
    except DatabaseError:
        return None
    return {
        "alias": alias,
        "pooler": pooled,
        "server_side_cursors_disabled": bool(conn.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")),
    }


def check_pooler(ctx: Any) -> Any:
    from durable_workflow.operations.doctor.result import OK, WARNING, CheckResult

    alias = engine_alias()
    found = finding(alias)
    title = "Connection pooler"
    if found is None or not found["pooler"]:
        return CheckResult(
            "connection_pooler",
            title,
            OK,
            f"database {alias!r}: no pooler in between",
            details=found or {"alias": alias},
        )
    if found["server_side_cursors_disabled"]:
        return CheckResult(
            "connection_pooler",
            title,
            OK,
            f"database {alias!r} is reached through a pooler; server-side cursors are off "
            "and the engine sends its statements unprepared",
            details=found,
        )
    return CheckResult(
        "connection_pooler",
        title,
        WARNING,
        f"database {alias!r} is reached through a pooler, and DISABLE_SERVER_SIDE_CURSORS "
        "is not set",
        ADVICE.format(alias=alias),
        details=found,
    )
