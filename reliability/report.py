"""The table on stdout: one line per scenario, then what each found."""

from __future__ import annotations

from typing import Any

COLUMNS = (
    ("scenario", 10),
    ("completed", 11),
    ("wrong", 6),
    ("dup hist", 9),
    ("after end", 10),
    ("stuck", 6),
    ("re-run acts", 12),
    ("drain s", 8),
    ("faults", 7),
    ("status", 6),
)


def _cells(name: str, f: dict[str, Any]) -> list[str]:
    if f.get("status") == "error":
        return [name, *["-"] * (len(COLUMNS) - 2), "ERROR"]
    orders = f["orders"]
    executions = f["executions"]
    return [
        name,
        f"{orders['completed']}/{orders['total']}",
        str(orders["wrong_outputs"]),
        str(sum(f["duplicates"].values())),
        str(f["events_after_terminal"]),
        str(f["stuck"]["count"]),
        f"{executions['activities_run_more_than_once']} ({executions['extra_body_runs']})",
        "-" if f["drain_seconds"] is None else f"{f['drain_seconds']:.0f}",
        str(len([x for x in f["faults"] if x["kind"] != "restore"])),
        f["status"],
    ]


def print_table(results: dict[str, Any]) -> None:
    meta = results["meta"]
    print(
        f"\nReliability ({'quick' if meta['quick'] else 'full'}) at "
        f"{(meta['source'].get('commit') or '?')[:12]}, load {meta['load_average_at_start']}"
    )
    header = "".join(title.ljust(width) for title, width in COLUMNS)
    print(header)
    print("-" * len(header))
    for name, figures in results["scenarios"].items():
        print("".join(c.ljust(w) for c, (_, w) in zip(_cells(name, figures), COLUMNS, strict=True)))
    print("\ncompleted: Order workflows completed/started; re-run acts: activities whose body ran")
    print("more than once (extra runs); drain: seconds from the last fault until every run closed.")
    for name, figures in results["scenarios"].items():
        _details(name, figures)


def _details(name: str, f: dict[str, Any]) -> None:
    print(f"\n== {name}: {f.get('title', '')}")
    if f.get("status") == "error":
        print(f"   harness error: {f.get('error')}")
        return
    if f["engine_settings"]:
        print(f"   engine settings changed: {f['engine_settings']}")
    timing = f["timing"]
    print(
        f"   leases reclaimed {timing['leases_reclaimed'] or 0}, handed back "
        f"{timing['leases_handed_back'] or 0}, taken from live holders "
        f"{timing['leases_taken_from_live_holders']}; taken before expiry "
        f"{timing['leases_taken_before_expiry'] or 0}; timers fired early "
        f"{timing['timers_fired_early']} (worst {timing['timer_earliest_by_s']} s)"
    )
    recovery = f.get("recovery", {})
    if recovery.get("deaths"):
        taken = recovery["seconds_to_take_back"]
        print(
            f"   {recovery['deaths']} processes killed stranded {recovery['leases_stranded']} "
            f"leases: taken back after {taken['median']} s (median), {taken['max']} s (max); "
            f"never: {recovery['never_taken_back']}"
        )
    exits = f["process_exits"]
    print(
        f"   killed by the harness {exits['killed_by_harness'] or 0}; exited on their own "
        f"{exits['exited_on_their_own'] or 0}; client calls retried {f['client']['errors_retried']}"
    )
    for key in ("schedules", "scheduled_runs", "poison", "poison_runs", "rss"):
        if key in f:
            print(f"   {key}: {f[key]}")
    for failure in f["failures"]:
        print(f"   ✗ {failure}")
    for warning in f.get("warnings", []):
        print(f"   ! {warning}")
    for sample in f["stuck"]["samples"][:3]:
        print(f"   stuck: {sample}")
    if "doctor" in f:
        for check in f["doctor"].get("checks", []):
            expected = " (expected)" if check.get("expected") else ""
            print(f"   doctor {check['status']}{expected}: {check['id']}: {check['message']}")
