"""Named work queues with limits, as declared in ``DURABLE_WORKFLOW["QUEUES"]``.

A queue here is the routing ``queue`` an activity already has (its class attribute or
``ActivityOptions(queue=...)``); declaring it gives that queue limits the database
enforces when an attempt is leased, so they hold across every worker and machine::

    DURABLE_WORKFLOW = {
        "QUEUES": {
            "stripe": {"concurrency": 20, "rate": "50/s", "worker_concurrency": 4},
        }
    }

``concurrency``: attempts leased at once, fleet-wide. ``rate``: attempt starts per
period, fleet-wide (``"N/s"``, ``"N/m"``, ``"N/h"``, or ``"N/Ks"`` for a period of K
seconds, minutes or hours). ``worker_concurrency``: attempts leased at once by one
worker node (a Celery ``-n`` node name, all its pool processes together).

``workflow_concurrency`` limits the workflow *runs* routed to the queue instead (DBOS's
workflow queues): at most that many open runs of the queue have been let start, and
the rest wait ``pending``, lower priority first (``options.check_priority``), first
come first served within one; the gate is :mod:`durable_workflow.executor.workflow_gate`::

    DURABLE_WORKFLOW = {"QUEUES": {"reports": {"workflow_concurrency": 5}}}

The keys count different things (attempts, runs), so one queue may have both kinds.

Pure values, no database: the gate that enforces them is
:mod:`durable_workflow.executor.queue_gate`. This module is the one place the setting
is read and checked.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from durable_workflow.exceptions import ConfigurationError

_KEYS = {"concurrency", "rate", "worker_concurrency", "workflow_concurrency"}
_RATE = re.compile(r"(?P<limit>[0-9]{1,9})/(?P<count>[0-9]{0,6})(?P<unit>[smh])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
#: A window longer than a day is a quota, not a rate: refused rather than half-served.
MAX_PERIOD_SECONDS = 86_400


@dataclasses.dataclass(frozen=True)
class Rate:
    """At most ``limit`` attempt starts in any ``period`` seconds (a sliding window)."""

    limit: int
    period: float
    text: str

    def __str__(self) -> str:
        return self.text


@dataclasses.dataclass(frozen=True)
class QueueLimit:
    """Limits of one named queue (``None``: that limit is off)."""

    name: str
    concurrency: int | None = None
    rate: Rate | None = None
    worker_concurrency: int | None = None
    #: Open runs of the queue let start at once (not an activity limit: see ``limited``).
    workflow_concurrency: int | None = None

    @property
    def limited(self) -> bool:
        """Whether the queue limits its activity attempts."""
        return (
            self.concurrency is not None
            or self.rate is not None
            or self.worker_concurrency is not None
        )

    def describe(self) -> str:
        """``concurrency 20, rate 50/s, worker_concurrency 4`` (the limits that are on)."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        if self.rate is not None:
            parts.append(f"rate {self.rate}")
        if self.worker_concurrency is not None:
            parts.append(f"worker_concurrency {self.worker_concurrency}")
        return ", ".join(parts) or "no limit"


def parse_rate(value: Any, *, where: str = "rate") -> Rate:
    """``"50/s"``, ``"1000/m"``, ``"10/h"``, ``"5/10s"`` as a :class:`Rate`."""
    found = _RATE.fullmatch(value) if isinstance(value, str) else None
    if found is None or int(found["limit"]) < 1:
        raise ConfigurationError(
            f"{where} must be a string like '50/s', '1000/m', '10/h' or '5/10s' "
            f"(starts per period), got {value!r}"
        )
    count = int(found["count"] or 1)
    if count < 1:
        raise ConfigurationError(f"{where}: the period must be at least 1 {found['unit']}")
    period = count * _UNIT_SECONDS[found["unit"]]
    if period > MAX_PERIOD_SECONDS:
        raise ConfigurationError(f"{where}: the period is at most a day, got {value!r}")
    return Rate(limit=int(found["limit"]), period=float(period), text=value)


def _count(spec: dict[str, Any], key: str, where: str) -> int | None:
    value = spec.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigurationError(f"{where}[{key!r}] must be an integer >= 1, got {value!r}")
    return value


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
        rate = spec.get("rate")
        limits[name] = QueueLimit(
            name=name,
            concurrency=_count(spec, "concurrency", where),
            rate=None if rate is None else parse_rate(rate, where=f"{where}['rate']"),
            worker_concurrency=_count(spec, "worker_concurrency", where),
            workflow_concurrency=_count(spec, "workflow_concurrency", where),
        )
    return limits


#: The reason a waiting task records, by the setting that holds it back.
REASONS = {"capacity": "concurrency", "rate": "rate", "worker": "worker_concurrency"}


def waiting_words(queue: str, reason: str | None = "concurrency") -> str:
    """How describe(), the admin and the doctor say that work waits on ``queue``
    (``reason``: the limit that holds it, ``concurrency``, ``rate`` or
    ``worker_concurrency``)."""
    words = f'waiting for capacity on queue "{queue}"'
    if reason == "rate":
        return words + " (rate limit)"
    if reason == "worker_concurrency":
        return words + " (per-worker limit)"
    return words


def declared() -> dict[str, QueueLimit]:
    """Every declared queue with a limit on its activity attempts."""
    from durable_workflow.conf import get_settings

    return {name: limit for name, limit in get_settings().QUEUES.items() if limit.limited}


def limit_of(queue: str | None) -> QueueLimit | None:
    """The limits of ``queue``, or ``None`` when it has none (the default queue never does)."""
    if queue is None:
        return None
    return declared().get(queue)


def workflow_limits() -> dict[str, int]:
    """Queue name: ``workflow_concurrency``, for every queue that limits its runs."""
    from durable_workflow.conf import get_settings

    return {
        name: limit.workflow_concurrency
        for name, limit in get_settings().QUEUES.items()
        if limit.workflow_concurrency is not None
    }


def workflow_limit_of(queue: str | None) -> int | None:
    """How many open runs of ``queue`` may have started (``None``: no limit)."""
    return None if queue is None else workflow_limits().get(queue)
