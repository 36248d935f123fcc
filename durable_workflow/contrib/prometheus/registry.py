"""What a scrape reads: this process's metrics, or every worker process's.

A prefork Celery worker runs tasks in child processes, each with metrics of its
own. With ``PROMETHEUS_MULTIPROC_DIR`` set (to an empty directory, before any
process starts) prometheus_client writes every process's values to files there,
and :func:`scrape_registry` reads them all through ``MultiProcessCollector``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from durable_workflow.contrib.prometheus.collector import DatabaseCollector

_connected: dict[str, bool] = {}


def multiprocess_dir() -> str | None:
    """The directory of multiprocess mode (``None``: one process, values in memory)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class _Forward(Collector):
    """The default registry's metrics (this process's, and any the project added)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def scrape_registry(*, database: bool = True) -> CollectorRegistry:
    """A registry for one scrape: the engine's counters and histograms (every process's
    in multiprocess mode) and, with ``database``, the gauges read from the database."""
    registry = CollectorRegistry()
    if multiprocess_dir():
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Forward())
    if database:
        registry.register(DatabaseCollector())
    return registry


def connect_celery() -> None:
    """Clean up after a prefork child that exits (idempotent): its live gauges go;
    its counters and histograms stay in the directory, as they must."""
    if _connected.get("celery"):
        return
    from celery import signals

    signals.worker_process_shutdown.connect(_process_exited, weak=False)
    _connected["celery"] = True


def _process_exited(pid: int | None = None, **kwargs: Any) -> None:
    path = multiprocess_dir()
    if path:
        multiprocess.mark_process_dead(pid or os.getpid(), path)  # type: ignore[no-untyped-call]
