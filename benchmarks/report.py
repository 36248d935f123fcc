"""The issue's targets, evaluated from scenario results, and the printed table."""

from __future__ import annotations

from typing import Any

from benchmarks import second_round

STICKY_TOLERANCE = 1.5  # "the same cost" at 10,000 as at 100 events: within 1.5x (timer noise)


def _target(status: Any, target: str, **numbers: Any) -> dict[str, Any]:
    return {"met": status, "target": target, "numbers": numbers}


def _scenario(scenarios: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, Any]:
    """(result, status to report when it cannot be judged)."""
    result = scenarios.get(name)
    if result is None:
        return None, "not_run"
    if result.get("status") == "not_available":
        return None, "not_available"
    if result.get("status") != "ok":
        return None, "error"
    return result, None


def evaluate_targets(s: dict[str, Any]) -> dict[str, Any]:
    targets: dict[str, Any] = {}

    db, why = _scenario(s, "dbwork")
    if db:
        lo, hi = db["points"]["10"], db["points"]["1000"]
        targets["db_queries_constant_per_step"] = _target(
            db["queries_constant"],
            "same number of queries per activity step at 10 and at 1,000 prior events",
            workflow_task=[lo["workflow_task"]["queries"], hi["workflow_task"]["queries"]],
            activity_task=[lo["activity_task"]["queries"], hi["activity_task"]["queries"]],
            prior_events=[lo["prior_events"], hi["prior_events"]],
        )
        targets["db_transactions_per_step_le_2"] = _target(
            db["max_transactions_per_task"] <= 2,
            "at most 2 transactions per step on each side (workflow task, activity task)",
            workflow_task=hi["workflow_task"]["transactions"],
            activity_task=hi["activity_task"]["transactions"],
        )
    else:
        targets["db_queries_constant_per_step"] = _target(why, "queries per step constant")
        targets["db_transactions_per_step_le_2"] = _target(
            why, "<= 2 transactions per step per side"
        )

    seq, why = _scenario(s, "sequential")
    if seq:
        ratio = seq["ratios"]["engine_vs_celery_p50"]
        targets["sequential_step_le_2x_celery"] = _target(
            ratio is not None and ratio <= 2.0,
            "first round: queued activity step at most 2x the bare Celery chain's per-task "
            "latency (p50)",
            engine_ms=seq["step_latency_ms"]["engine"]["median"],
            celery_ms=seq["step_latency_ms"]["celery"]["median"],
            ratio=ratio,
            ratio_p95=seq["ratios"]["engine_vs_celery_p95"],
        )
    else:
        targets["sequential_step_le_2x_celery"] = _target(
            why, "queued step <= 2x Celery chain task"
        )

    local, why = _scenario(s, "local")
    if local:
        targets["local_step_le_1_5x_dbos"] = _target(
            local["ratio"] is not None and local["ratio"] <= 1.5,
            "first round: local activity step at most 1.5x a DBOS step",
            engine_ms=local["engine_end_to_end_per_step_ms"]["median"],
            dbos_ms=local["dbos_end_to_end_per_step_ms"]["median"],
            ratio=local["ratio"],
        )
    else:
        dbos = (s.get("local") or {}).get("dbos_end_to_end_per_step_ms", {}).get("median")
        targets["local_step_le_1_5x_dbos"] = _target(
            why, "local activity step at most 1.5x a DBOS step", dbos_ms=dbos
        )

    tp, why = _scenario(s, "throughput")
    if tp:
        targets["throughput_ge_0_5x_celery"] = _target(
            tp["ratio"] is not None and tp["ratio"] >= 0.5,
            "first round: completed workflows/s at least 0.5x the 2-task Celery chain baseline",
            engine_per_s=tp["engine_workflows_per_second"]["median"],
            celery_per_s=tp["celery_chains_per_second"]["median"],
            ratio=tp["ratio"],
        )
    else:
        targets["throughput_ge_0_5x_celery"] = _target(why, "throughput >= 0.5x Celery chains")

    rp, why = _scenario(s, "replay")
    if rp:
        per_event = {k: v["feed_cpu_us_per_event"]["median"] for k, v in rp["cold"].items()}
        targets["cold_replay_le_20us_per_event"] = _target(
            rp["worst_cold_us_per_event"] <= 20,
            "cold replay at most 20 µs of CPU per history event",
            us_per_event=per_event,
        )
        sticky = {k: v["tail_only_us"]["median"] for k, v in rp["sticky"].items()}
        extra: dict[str, Any] = {
            "measured_on": "the pure runtime (a warm WorkflowRuntime fed only the new tail)",
        }
        if db:
            extra["executor_workflow_task_ms_at_prior_events"] = {
                str(p["prior_events"]): p["workflow_task"]["wall_ms"] for p in db["points"].values()
            }
        targets["sticky_hit_constant"] = _target(
            rp["sticky_ratio_large_vs_small"] is not None
            and rp["sticky_ratio_large_vs_small"] <= STICKY_TOLERANCE,
            f"a sticky hit costs the same at 10,000 events as at 100 (within {STICKY_TOLERANCE}x)",
            us_per_hit=sticky,
            ratio=rp["sticky_ratio_large_vs_small"],
            **extra,
        )
    else:
        targets["cold_replay_le_20us_per_event"] = _target(why, "cold replay <= 20 µs/event")
        targets["sticky_hit_constant"] = _target(why, "sticky hit constant")

    fo, why = _scenario(s, "fanout")
    if fo:
        targets["fanout_1000_le_2x_chord"] = _target(
            fo["ratio"] is not None and fo["ratio"] <= 2.0,
            "first round: the 1,000-way fan-out finishes, in at most 2x the chord's time",
            engine_s=fo["engine_seconds"]["median"],
            chord_s=fo["chord_seconds"]["median"],
            ratio=fo["ratio"],
        )
    else:
        chord = (s.get("fanout") or {}).get("chord_seconds", {}).get("median")
        status = why
        if why == "error" and (s.get("fanout") or {}).get("rows"):
            status = False  # the engine's fan-out ran and failed: the target is not met
        targets["fanout_1000_le_2x_chord"] = _target(
            status, "1,000-way fan-out finishes in at most 2x a chord", chord_s=chord
        )

    mem, why = _scenario(s, "memory")
    if mem:
        growth = mem["growth_10000_mb"]
        targets["worker_rss_growth_lt_20mb"] = _target(
            growth is not None and growth < 20,
            "worker RSS grows less than 20 MB over 10,000 workflows",
            growth_mb=growth,
            basis=mem["growth_basis"],
            growth_per_worker_mb=mem["engine"]["growth_mb"],
            celery_chain_growth_mb=mem["celery"]["max_growth_mb"],
        )
    else:
        targets["worker_rss_growth_lt_20mb"] = _target(why, "RSS growth < 20 MB / 10,000 workflows")
    targets.update(second_round.evaluate(s))
    return targets


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def print_table(results: dict[str, Any]) -> None:
    header = ("scenario", "metric", "engine", "baseline", "ratio", "unit")
    lines: list[tuple[str, ...]] = []
    for name, outcome in results["scenarios"].items():
        if outcome.get("status") == "error" and not outcome.get("rows"):
            lines.append((name, "ERROR: " + outcome.get("error", "")[:90], "", "", "", ""))
            continue
        for r in outcome.get("rows", []):
            baseline = _fmt(r["baseline"])
            if r.get("baseline_name") and r["baseline"] is not None:
                baseline += f" ({r['baseline_name']})"
            lines.append(
                (name, r["metric"], _fmt(r["engine"]), baseline, _fmt(r["ratio"]), r["unit"])
            )
    widths = [
        max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
        for i, h in enumerate(header)
    ]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
    print("\nTargets")
    for target in results["targets"].values():
        met = target["met"]
        mark = (
            {True: "MET", False: "NOT MET"}.get(met, str(met).upper())
            if isinstance(met, bool)
            else str(met).upper()
        )
        numbers = ", ".join(f"{k}={v}" for k, v in target["numbers"].items())
        print(f"  [{mark:>13}] {target['target']}" + (f"  ({numbers})" if numbers else ""))


def markdown(results: dict[str, Any]) -> str:
    """The results table and the targets as Markdown (for docs/performance.md)."""
    out = [
        "| scenario | metric | engine | baseline | engine / baseline |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, outcome in results["scenarios"].items():
        if outcome.get("status") == "error" and not outcome.get("rows"):
            out.append(f"| {name} | error: {outcome.get('error', '')[:80]} | | | |")
        for r in outcome.get("rows", []):
            unit = f" {r['unit']}" if r["unit"] and r["unit"] != "x" else ""
            baseline = "" if r["baseline"] is None else f"{_fmt(r['baseline'])}{unit}"
            if baseline and r.get("baseline_name"):
                baseline += f" ({r['baseline_name']})"
            engine = _fmt(r["engine"]) + (
                unit
                if isinstance(r["engine"], int | float)
                else (unit if r["engine"] and "/" in str(r["engine"]) else "")
            )
            ratio = "" if r["ratio"] is None else f"{_fmt(r['ratio'])}x"
            out.append(f"| {name} | {r['metric']} | {engine} | {baseline} | {ratio} |")
    out += ["", "| target | met | numbers |", "| --- | --- | --- |"]
    for target in results["targets"].values():
        met = target["met"]
        label = (
            {True: "yes", False: "**no**"}.get(met, str(met).replace("_", " "))
            if isinstance(met, bool)
            else str(met).replace("_", " ")
        )
        numbers = ", ".join(f"{k}={v}" for k, v in target["numbers"].items() if k != "measured_on")
        out.append(f"| {target['target']} | {label} | {numbers} |")
    return "\n".join(out)


if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/latest.json") as handle:
        print(markdown(json.load(handle)))
