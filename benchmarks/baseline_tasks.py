"""Bare Celery tasks: the baselines the engine is compared with.

Each chain task appends its start time to the list it receives, so the last
one knows every hop's timing; completion is reported with one Redis RPUSH.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import redis

from benchmarks import config
from benchmarks.celery_app import app


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(config.REDIS_URL)


@app.task(name="bench.step", ignore_result=True)
def step(stamps: list[float] | None = None, report_key: str | None = None) -> list[float]:
    """One no-op hop of a chain; the last one (``report_key`` set) reports the timings."""
    stamps = [*(stamps or []), time.time()]
    if report_key:
        _redis().rpush(report_key, json.dumps(stamps))
    return stamps


@app.task(name="bench.chord_member", ignore_result=False)
def chord_member(index: int) -> int:
    return index


@app.task(name="bench.chord_done", ignore_result=True)
def chord_done(results: list[Any], report_key: str) -> None:
    _redis().rpush(report_key, json.dumps({"count": len(results), "at": time.time()}))
