"""The second round of targets (issue 27), judged from the same scenario results.

Against the peers: the first round asked for a local step within 1.5x a DBOS step, a
queued step within 2x a Celery chain task, throughput at least 0.5x the 2-task chain
and a 1,000-way fan-out within 2x a chord (``report.py`` keeps judging those); the
second round asks for 0.8x, 1.5x, 0.75x and 1.3x. Each is judged on the medians; the
p95 ratio (the worst repetition for throughput) is reported beside it.

Long histories and big payloads (``long`` scenario): cold replay within the
first round's 20 µs per event on a real 50,000-event history, a sticky hit and a
signal that cost the same at 50,000 events as at 100, and a warm step with 2 MiB
payloads that reads only its own tail.
"""

from __future__ import annotations

from typing import Any

FLAT = 1.5  # "the same cost" for wall times (timer and machine noise)
FLAT_BYTES = 1.1  # bytes read are deterministic up to ids and timestamps


def _target(status: Any, target: str, **numbers: Any) -> dict[str, Any]:
    return {"met": status, "target": target, "numbers": numbers}


def _ok(scenarios: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, Any]:
    result = scenarios.get(name)
    if result is None:
        return None, "not_run"
    if result.get("status") == "not_available":
        return None, "not_available"
    if result.get("status") != "ok":
        return None, "error"
    return result, None


def _ratio(a: Any, b: Any, digits: int = 3) -> float | None:
    """``a / b`` (judged unrounded beyond ``digits``: the scenarios' own ratios are
    rounded to two digits, which would let 0.802 pass for 0.8)."""
    return None if a is None or not b else round(a / b, digits)


def _within(ratio: float | None, limit: float) -> bool:
    return ratio is not None and ratio <= limit


def peers(s: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    local, why = _ok(s, "local")
    text = "second round: local activity step at most 0.8x a DBOS step"
    if local:
        engine, dbos = local["engine_end_to_end_per_step_ms"], local["dbos_end_to_end_per_step_ms"]
        ratio = _ratio(engine["median"], dbos["median"])
        out["local_step_le_0_8x_dbos"] = _target(
            _within(ratio, 0.8),
            text,
            engine_ms=engine["median"],
            dbos_ms=dbos["median"],
            ratio=ratio,
            ratio_p95=_ratio(engine["p95"], dbos["p95"]),
        )
    else:
        out["local_step_le_0_8x_dbos"] = _target(why, text)

    seq, why = _ok(s, "sequential")
    text = "second round: queued activity step at most 1.5x a bare Celery chain task (p50)"
    if seq:
        engine, celery = seq["step_latency_ms"]["engine"], seq["step_latency_ms"]["celery"]
        ratio = _ratio(engine["median"], celery["median"])
        out["sequential_step_le_1_5x_celery"] = _target(
            _within(ratio, 1.5),
            text,
            engine_ms=engine["median"],
            celery_ms=celery["median"],
            ratio=ratio,
            ratio_p95=_ratio(engine["p95"], celery["p95"]),
        )
    else:
        out["sequential_step_le_1_5x_celery"] = _target(why, text)

    tp, why = _ok(s, "throughput")
    text = "second round: completed workflows/s at least 0.75x the 2-task Celery chain"
    if tp:
        engine, celery = tp["engine_workflows_per_second"], tp["celery_chains_per_second"]
        ratio = _ratio(engine["median"], celery["median"])
        out["throughput_ge_0_75x_celery"] = _target(
            ratio is not None and ratio >= 0.75,
            text,
            engine_per_s=engine["median"],
            celery_per_s=celery["median"],
            ratio=ratio,
            ratio_worst_rep=_ratio(engine["min"], celery["min"]),
        )
    else:
        out["throughput_ge_0_75x_celery"] = _target(why, text)

    fo, why = _ok(s, "fanout")
    text = "second round: the 1,000-way fan-out in at most 1.3x the chord's time"
    if fo:
        engine, chord = fo["engine_seconds"], fo["chord_seconds"]
        ratio = _ratio(engine["median"], chord["median"])
        out["fanout_1000_le_1_3x_chord"] = _target(
            _within(ratio, 1.3),
            text,
            engine_s=engine["median"],
            chord_s=chord["median"],
            ratio=ratio,
            ratio_p95=_ratio(engine.get("p95"), chord.get("p95")),
        )
    else:
        out["fanout_1000_le_1_3x_chord"] = _target(why, text)
    return out


def long_histories(s: dict[str, Any]) -> dict[str, Any]:
    names = (
        "long_cold_replay_le_20us_per_event",
        "long_sticky_hit_flat",
        "long_signal_reads_no_history",
        "big_payload_warm_step_reads_its_tail",
    )
    result, why = _ok(s, "long")
    if not result:
        return {name: _target(why, name.replace("_", " ")) for name in names}
    short, long, big = result["short"], result["long"], result["big_payload"]
    pure = long["pure_replay"]["feed_cpu_us_per_event"]["median"]
    task = long["cold_step"]["cpu_us_per_event"]
    warm_long, warm_short = long["warm_step"]["workflow_task"], short["warm_step"]["workflow_task"]
    wall = _ratio(warm_long["wall_ms"], warm_short["wall_ms"])
    read = _ratio(warm_long["bytes_received"], warm_short["bytes_received"])
    call_long, call_short = long["signal_warm"]["call"], short["signal_warm"]["call"]
    signal_read = _ratio(call_long["bytes_received"], call_short["bytes_received"])
    signal_task = _ratio(
        long["signal_warm"]["workflow_task"]["bytes_received"],
        short["signal_warm"]["workflow_task"]["bytes_received"],
    )
    reads = big["warm_reads_first_last"]
    return {
        names[0]: _target(
            pure <= 20,
            f"cold replay of a real {long['events']}-event history at most 20 µs of CPU per "
            "event (pure runtime; the whole workflow task's CPU per event beside it)",
            pure_runtime_us=pure,
            workflow_task_us=task,
            cold_task_ms=long["cold_step"]["workflow_task"]["wall_ms"],
        ),
        names[1]: _target(
            _within(wall, FLAT) and _within(read, FLAT_BYTES),
            f"a sticky hit costs the same at {long['events']} events as at {short['events']} "
            f"(wall within {FLAT}x, bytes read within {FLAT_BYTES}x)",
            wall_ms=[warm_long["wall_ms"], warm_short["wall_ms"]],
            bytes_received=[warm_long["bytes_received"], warm_short["bytes_received"]],
            wall_ratio=wall,
        ),
        names[2]: _target(
            _within(signal_read, FLAT_BYTES) and _within(signal_task, FLAT_BYTES),
            f"a signal to the {long['events']}-event run reads no more than one to a "
            f"{short['events']}-event run (the call, and its workflow task on a warm worker)",
            call_bytes=[call_long["bytes_received"], call_short["bytes_received"]],
            call_statements=[call_long["queries"], call_short["queries"]],
            latency_ms_warm=[long["signal_warm"]["latency_ms"], short["signal_warm"]["latency_ms"]],
            latency_ms_cold=[long["signal_cold"]["latency_ms"], short["signal_cold"]["latency_ms"]],
        ),
        names[3]: _target(
            _within(_ratio(reads[1], reads[0]), FLAT_BYTES),
            f"with {big['payload_chars']}-character payloads a warm workflow task reads its "
            "own tail only (bytes read by the last step within 1.1x the first)",
            bytes_first_last=reads,
            step_ms=[big["step_wall_ms"], result["small_payload"]["step_wall_ms"]],
            rss_growth_mb=big["rss_growth_mb"],
        ),
    }


def floor(s: dict[str, Any]) -> dict[str, Any]:
    """The physical floor (``floor`` scenario): WAL per step at most a DBOS step's."""
    result, why = _ok(s, "floor")
    text = "physical floor: no more WAL per step than a DBOS step (local, eager, queued)"
    if not result:
        return {"floor_wal_le_dbos": _target(why, text)}
    wal = {side: v["per_step"]["wal_bytes"] for side, v in result["sides"].items()}
    return {
        "floor_wal_le_dbos": _target(
            all(result["wal_le_dbos"].values()),
            text,
            wal_bytes_per_step=wal,
            ratio_local=_ratio(wal["local"], wal["dbos"]),
            ratio_eager=_ratio(wal["eager"], wal["dbos"]),
            ratio_queued=_ratio(wal["queued"], wal["dbos"]),
        )
    }


def evaluate(s: dict[str, Any]) -> dict[str, Any]:
    return {**peers(s), **long_histories(s), **floor(s)}
