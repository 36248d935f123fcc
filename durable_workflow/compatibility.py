"""Compatibility markers: which build may execute which run, during rolling deploys.

A run is stamped with the marker of the process that started it
(``COMPATIBILITY_CURRENT``) and every task of the run carries that marker. A
worker claims a task only when its markers support the task's; a task without a
marker is claimable by any worker. This module holds the rule itself, with no
database access; ``executor.compatibility`` applies it at the claim points.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

#: Supports every marker (in ``COMPATIBILITY_SUPPORTED``; never a run's marker).
WILDCARD = "*"

#: Run diagnostic: an open task's marker is supported by no live worker and not here.
NO_COMPATIBLE_WORKER = "no_compatible_worker_for_task"

#: Longest marker a run or task row stores.
MAX_LENGTH = 191


def normalize(marker: object) -> str | None:
    """A marker as stored: stripped, ``None`` for nothing or an empty string."""
    if not isinstance(marker, str):
        return None
    return marker.strip() or None


def supported_markers(current: str | None, supported: Iterable[str]) -> tuple[str, ...]:
    """The markers a process supports: ``supported``, or just ``current`` when empty.

    A wildcard anywhere collapses the list to ``("*",)``; no configuration at
    all gives ``()``, which supports only unmarked tasks.
    """
    configured = tuple(dict.fromkeys(m for m in map(normalize, supported) if m))
    if not configured:
        marker = normalize(current)
        return (marker,) if marker else ()
    return (WILDCARD,) if WILDCARD in configured else configured


def supports(markers: Collection[str], required: str | None) -> bool:
    """Whether a worker advertising ``markers`` may claim a task marked ``required``."""
    required = normalize(required)
    return required is None or WILDCARD in markers or required in markers


def mismatch_reason(markers: Collection[str], required: str | None) -> str | None:
    """Why ``markers`` cannot claim ``required`` (``None`` when they can)."""
    if supports(markers, required):
        return None
    offered = ", ".join(markers) or "none"
    return f"requires compatibility {required!r}; this worker supports [{offered}]"


def current_marker() -> str | None:
    """The marker this process stamps on the runs it starts."""
    from durable_workflow.conf import get_settings

    return normalize(get_settings().COMPATIBILITY_CURRENT)


def local_markers() -> tuple[str, ...]:
    """The markers this process may execute (what its worker registration advertises)."""
    from durable_workflow.conf import get_settings

    settings = get_settings()
    return supported_markers(settings.COMPATIBILITY_CURRENT, settings.COMPATIBILITY_SUPPORTED)
