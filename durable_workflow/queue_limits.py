"""Named work queues with fleet-wide limits, as declared in ``DURABLE_WORKFLOW["QUEUES"]``.

A queue here is the routing ``queue`` an activity already has (its class attribute or
``ActivityOptions(queue=...)``); declaring it gives that queue limits the database
enforces when an attempt is leased, so they hold across every worker and machine::

    DURABLE_WORKFLOW = {"QUEUES": {"stripe": {"concurrency": 20}}}

Pure values, no database: the gate that enforces them is
:mod:`durable_workflow.executor.queue_gate`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from durable_workflow.exceptions import ConfigurationError

_KEYS = {"concurrency"}


@dataclasses.dataclass(frozen=True)
class QueueLimit:
    """Limits of one named queue. ``concurrency``: attempts leased at once, fleet-wide."""

    name: str
    concurrency: int | None = None

    @property
    def limited(self) -> bool:
        return self.concurrency is not None


def parse(raw: Any) -> dict[str, QueueLimit]:
    """``DURABLE_WORKFLOW["QUEUES"]`` checked (a ``ConfigurationError`` names the fault)."""
    if not isinstance(raw, dict):
        raise ConfigurationError("DURABLE_WORKFLOW['QUEUES'] must be a dict of queue name: limits")
    limits = {}
    for name, spec in raw.items():
        where = f"DURABLE_WORKFLOW['QUEUES'][{name!r}]"
        if not isinstance(name, str) or not name or len(name) > 255 or not name.isprintable():
            raise ConfigurationError(f"{where}: a queue name is a printable string of 1 to 255")
        if not isinstance(spec, dict) or set(spec) - _KEYS:
            raise ConfigurationError(f"{where} must be a dict with keys among: {sorted(_KEYS)}")
        concurrency = spec.get("concurrency")
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ConfigurationError(f"{where}['concurrency'] must be an integer >= 1")
        limits[name] = QueueLimit(name=name, concurrency=concurrency)
    return limits


def declared() -> dict[str, QueueLimit]:
    """Every declared queue with a limit."""
    from durable_workflow.conf import get_settings

    return {name: limit for name, limit in get_settings().QUEUES.items() if limit.limited}


def limit_of(queue: str | None) -> QueueLimit | None:
    """The limits of ``queue``, or ``None`` when it has none (the default queue never does)."""
    if queue is None:
        return None
    return declared().get(queue)
