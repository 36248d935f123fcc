"""The invariants, read from the engine's database (and the activity ledger) after a
scenario has drained. Each query names what it counts; nothing here trusts a worker's
own account of what it did."""

from __future__ import annotations

import pathlib
from typing import Any

from benchmarks.stats import summary
from reliability import audit, ledger
from reliability.load import Workload
from reliability.workflows import expected_order

TERMINAL_EVENTS = (
    "WorkflowCompleted",
    "WorkflowFailed",
    "WorkflowTimedOut",
    "WorkflowCancelled",
    "WorkflowTerminated",
    "WorkflowContinuedAsNew",
)
TERMINAL_STATUSES = ("completed", "failed", "cancelled", "terminated")

#: Events that settle one thing, keyed by what they settle: two of them for one key is a
#: duplicate even when their sequences differ.
RESOLUTIONS = {
    "activity completed twice": (
        "('ActivityCompleted', 'ActivityFailed', 'ActivityTimedOut', 'ActivityCancelled')",
        "activity_execution_id",
    ),
    "timer fired twice": ("('TimerFired')", "timer_id"),
    "child outcome twice": (
        "('ChildRunCompleted', 'ChildRunFailed', 'ChildRunCancelled', 'ChildRunTerminated')",
        "child_call_id",
    ),
    "signal applied twice": ("('SignalApplied')", "signal_id"),
}


def _scalar(conn, sql: str, params: Any = None) -> Any:  # type: ignore[no-untyped-def]
    return conn.execute(sql, params).fetchone()[0]


def run_counts(conn) -> dict[str, dict[str, int]]:  # type: ignore[no-untyped-def]
    """Runs per workflow type and status."""
    counts: dict[str, dict[str, int]] = {}
    rows = conn.execute(
        "SELECT workflow_type, status, count(*) FROM durable_workflow_run GROUP BY 1, 2"
    ).fetchall()
    for workflow_type, status, n in rows:
        counts.setdefault(workflow_type, {})[status] = n
    return counts


def orders(conn, workload: Workload) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Completed / total of the workload's ``Order`` runs, and outputs that are wrong."""
    from durable_workflow.codec import envelope

    rows = conn.execute(
        "SELECT r.instance_id, r.status, r.output, r.payload_codec FROM durable_workflow_run r "
        "WHERE r.workflow_type = 'chaos.order' AND r.instance_id LIKE %s",
        (workload.prefix + "-%",),
    ).fetchall()
    completed, wrong, samples = 0, 0, []
    for instance_id, status, output, codec in rows:
        if status != "completed":
            continue
        completed += 1
        n = int(instance_id.rsplit("-", 1)[1])
        want = expected_order(*workload.shape_for(n).arguments(n))
        got = envelope.decode(output, expected_codec=codec) if output is not None else None
        if got != want:
            wrong += 1
            if len(samples) < 5:
                samples.append({"instance_id": instance_id, "got": got, "want": want})
    return {
        "total": workload.count,
        "completed": completed,
        "wrong_outputs": wrong,
        "wrong_samples": samples,
    }


def duplicates(conn) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """History written twice: one (run, sequence) twice, or one thing settled twice."""
    found = {
        "same run and sequence": _scalar(
            conn,
            "SELECT count(*) FROM (SELECT 1 FROM durable_workflow_history_event "
            "GROUP BY run_id, sequence HAVING count(*) > 1) d",
        ),
        "attempt completed twice": _scalar(
            conn,
            "SELECT count(*) FROM (SELECT 1 FROM durable_workflow_activity_attempt "
            "WHERE status = 'completed' GROUP BY execution_id HAVING count(*) > 1) d",
        ),
        "timer fire recorded twice": _scalar(conn, audit.TIMERS_FIRED_TWICE),
    }
    for name, (types, key) in RESOLUTIONS.items():
        found[name] = _scalar(
            conn,
            "SELECT count(*) FROM (SELECT 1 FROM durable_workflow_history_event "
            f"WHERE event_type IN {types} GROUP BY run_id, payload->>'{key}' "
            "HAVING count(*) > 1) d",
        )
    return found


def events_after_terminal(conn) -> int:  # type: ignore[no-untyped-def]
    return _scalar(
        conn,
        "SELECT count(*) FROM durable_workflow_history_event h JOIN ("
        "  SELECT run_id, min(sequence) AS seq FROM durable_workflow_history_event"
        f"  WHERE event_type IN {TERMINAL_EVENTS} GROUP BY run_id"
        ") t ON h.run_id = t.run_id AND h.sequence > t.seq",
    )


def _open(expected_open: tuple[str, ...]) -> str:
    """Where-clause of the open runs, but those of types that may stay open by design."""
    clause = f"status NOT IN {TERMINAL_STATUSES}"
    if expected_open:
        clause += " AND workflow_type NOT IN (" + ", ".join(f"'{t}'" for t in expected_open) + ")"
    return clause


def open_runs(conn, expected_open: tuple[str, ...] = ()) -> int:  # type: ignore[no-untyped-def]
    return _scalar(conn, f"SELECT count(*) FROM durable_workflow_run WHERE {_open(expected_open)}")


def stuck_runs(conn, expected_open: tuple[str, ...] = (), limit: int = 5) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Open runs, with what a few of them wait on (last events, open tasks)."""
    rows = conn.execute(
        "SELECT id, instance_id, workflow_type, status FROM durable_workflow_run "
        f"WHERE {_open(expected_open)} ORDER BY created_at"
    ).fetchall()
    samples = []
    for run_id, instance_id, workflow_type, status in rows[:limit]:
        events = conn.execute(
            "SELECT sequence, event_type FROM durable_workflow_history_event WHERE run_id = %s "
            "ORDER BY sequence DESC LIMIT 3",
            (run_id,),
        ).fetchall()
        tasks = conn.execute(
            "SELECT task_type, status, attempt_count, dispatch_count, "
            "round(extract(epoch FROM available_at - now())::numeric, 1), "
            "round(extract(epoch FROM lease_expires_at - now())::numeric, 1), "
            "left(last_error, 300), lease_owner FROM durable_workflow_task WHERE run_id = %s "
            "AND status IN ('ready', 'leased')",
            (run_id,),
        ).fetchall()
        samples.append(
            {
                "instance_id": instance_id,
                "workflow_type": workflow_type,
                "status": status,
                "last_events": [f"{seq} {kind}" for seq, kind in reversed(events)],
                "open_tasks": [
                    {
                        "type": t[0],
                        "status": t[1],
                        "attempts": t[2],
                        "dispatches": t[3],
                        "due_in_s": float(t[4]) if t[4] is not None else None,
                        "lease_left_s": float(t[5]) if t[5] is not None else None,
                        "last_error": t[6] or "",
                        "lease_owner": t[7],
                    }
                    for t in tasks
                ],
                "failed_workflow_task": _scalar(
                    conn,
                    "SELECT left(last_error, 300) FROM durable_workflow_task WHERE run_id = %s "
                    "AND task_type = 'workflow' ORDER BY created_at DESC LIMIT 1",
                    (run_id,),
                )
                if not tasks
                else None,
            }
        )
    return {"count": len(rows), "samples": samples}


def executions(conn, run_dir: pathlib.Path) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Activity bodies run more than once (at-least-once: allowed, counted), from the
    ledger, next to the attempts the database recorded."""
    ran = ledger.counts(run_dir, "step")
    again = {key: n for key, n in ran.items() if n > 1}
    return {
        "activity_bodies_run": sum(ran.values()),
        "activities_run_more_than_once": len(again),
        "extra_body_runs": sum(n - 1 for n in again.values()),
        "executions_with_several_attempts": _scalar(
            conn,
            "SELECT count(*) FROM durable_workflow_activity_execution WHERE attempt_count > 1",
        ),
    }


def recovery(conn, deaths: list[tuple[float, tuple[int, ...]]]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """How long the work of killed processes waited: for each lease a killed process held
    when it died, the seconds until another process took the task back (``None``: never)."""
    waits: list[float | None] = []
    for at, pids in deaths:
        rows = conn.execute(
            "SELECT extract(epoch FROM released_db) FROM chaos_lease_audit "
            "WHERE split_part(owner, ':', 2) = ANY(%s) AND extract(epoch FROM claimed_db) <= %s "
            "AND (released_db IS NULL OR (extract(epoch FROM released_db) > %s "
            "AND released_as NOT IN ('completed', 'cancelled')))",
            ([str(p) for p in pids], at, at),
        ).fetchall()
        waits += [None if released is None else float(released) - at for (released,) in rows]
    done = sorted(w for w in waits if w is not None)
    return {
        "deaths": len(deaths),
        "leases_stranded": len(waits),
        "never_taken_back": len(waits) - len(done),
        "seconds_to_take_back": summary(done, digits=1),
    }


def taken_from_live(conn) -> int:  # type: ignore[no-untyped-def]
    """Leases another process took back while their holder still runs (it is alive now):
    false expiries, whatever the lease's length said."""
    from reliability.processes import alive_and_ours

    owners = conn.execute(
        f"SELECT split_part(owner, ':', 2) FROM chaos_lease_audit WHERE {audit.RECLAIMED}"
    ).fetchall()
    return sum(1 for (pid,) in owners if pid.isdigit() and alive_and_ours(int(pid)))


def timing(conn) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Timers fired early and leases given away before they expired, in database time."""
    early = conn.execute(
        audit.TIMERS_FIRED_EARLY, {"tolerance": audit.EARLY_TOLERANCE_SECONDS}
    ).fetchall()
    taken = conn.execute(
        audit.LEASES_TAKEN_EARLY, {"tolerance": audit.EARLY_TOLERANCE_SECONDS}
    ).fetchall()
    reclaimed = dict(conn.execute(audit.LEASES_RECLAIMED).fetchall())
    handed_back = dict(conn.execute(audit.LEASES_HANDED_BACK).fetchall())
    return {
        "timers_fired_early": sum(n for _, _, n, _ in early),
        "timer_earliest_by_s": round(max((float(w) for *_, w in early), default=0.0), 2),
        "timers_fired_early_by": [
            {"scheduled_by": by, "fired_by": fired, "count": n, "earliest_by_s": round(float(w), 2)}
            for by, fired, n, w in early
        ],
        "leases_reclaimed": reclaimed,
        "leases_taken_from_live_holders": taken_from_live(conn),
        "leases_handed_back": handed_back,
        "leases_taken_before_expiry": {kind: n for kind, n, _ in taken},
        "lease_taken_earliest_by_s": round(max((float(w) for *_, w in taken), default=0.0), 2),
    }
