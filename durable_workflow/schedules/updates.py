"""Applying ``ScheduleManager.update(...)`` keyword changes to a locked schedule."""

from __future__ import annotations

from typing import Any

from durable_workflow import text
from durable_workflow.authoring import visibility
from durable_workflow.exceptions import InvalidValueError
from durable_workflow.models.schedules import ScheduleOverlapPolicy
from durable_workflow.schedules.actions import build_action
from durable_workflow.schedules.errors import InvalidScheduleError
from durable_workflow.schedules.records import ScheduleRecord
from durable_workflow.schedules.specs import ScheduleSpec

_MAPS = ("labels", "memo", "search_attributes")
_PLAIN = ("labels", "memo", "search_attributes", "connection", "queue", "notes")
_ALLOWED = {
    "cron_expression",
    "timezone",
    "spec",
    "workflow",
    "arguments",
    "overlap_policy",
    "jitter_seconds",
    "max_runs",
    *_PLAIN,
}


def apply_changes(record: ScheduleRecord, changes: dict[str, Any]) -> tuple[list[str], bool]:
    """Validate everything first, then edit the record; returns (changed fields, reschedule)."""
    unknown = sorted(set(changes) - _ALLOWED)
    if unknown:
        raise InvalidScheduleError(f"update() does not accept: {', '.join(unknown)}")
    edits: dict[str, Any] = {}
    spec = _new_spec(record, changes)
    if spec is not None:
        edits["spec"] = spec
    if "workflow" in changes or "arguments" in changes:
        workflow = changes.get("workflow", record.workflow_type)
        arguments = changes["arguments"] if "arguments" in changes else record.input()
        action = build_action(workflow, arguments)
        edits.update(
            workflow_type=action.workflow_type,
            workflow_class=action.workflow_class,
            arguments=action.arguments,
        )
    if "overlap_policy" in changes:
        edits["overlap_policy"] = str(require_policy(changes["overlap_policy"]))
    if "jitter_seconds" in changes:
        edits["jitter_seconds"] = require_count(
            "jitter_seconds", changes["jitter_seconds"], minimum=0
        )
    if "max_runs" in changes:
        value = changes["max_runs"]
        edits["max_runs"] = None if value is None else require_count("max_runs", value, minimum=1)
        edits["remaining_actions"] = edits["max_runs"]
    edits.update(plain_fields({name: changes[name] for name in _PLAIN if name in changes}))
    changed = sorted(name for name, value in edits.items() if getattr(record, name) != value)
    if "arguments" in changed:  # an envelope differs whenever its input does
        changed = sorted({*changed, "input"} - {"arguments"})
    record.set(**edits)
    reschedule = "spec" in edits or "jitter_seconds" in edits
    return changed, reschedule


def plain_fields(values: dict[str, Any]) -> dict[str, Any]:
    """Labels, memo, search attributes, routing and notes, checked as a start would check
    them (a schedule must not store what its first fire could not use)."""
    checked: dict[str, Any] = {}
    try:
        for name, value in values.items():
            if name in _MAPS:
                checked[name] = _MAP_CHECKS[name](dict(value or {}))
            elif value is None:
                checked[name] = None
            else:
                limit = text.REASON_MAX if name == "notes" else text.NAME_MAX
                checked[name] = text.check(value, field=name, max_length=limit, allow_empty=True)
    except InvalidValueError as exc:
        raise InvalidScheduleError(str(exc)) from None
    return checked


_MAP_CHECKS = {
    "labels": visibility.check_labels,
    "memo": visibility.check_memo,
    "search_attributes": visibility.check_search_attributes,
}


def _new_spec(record: ScheduleRecord, changes: dict[str, Any]) -> dict[str, Any] | None:
    if "spec" in changes:
        if "cron_expression" in changes or "timezone" in changes:
            raise InvalidScheduleError("pass either spec or cron_expression/timezone, not both")
        return ScheduleSpec.parse(changes["spec"]).as_dict()
    if "cron_expression" not in changes and "timezone" not in changes:
        return None
    spec = dict(record.spec)
    if "cron_expression" in changes:
        spec["cron_expressions"] = [changes["cron_expression"]]
    if "timezone" in changes:
        spec["timezone"] = changes["timezone"]
    return ScheduleSpec.parse(spec).as_dict()


def require_count(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidScheduleError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def require_policy(value: Any) -> ScheduleOverlapPolicy:
    try:
        return ScheduleOverlapPolicy(value)
    except ValueError:
        choices = ", ".join(ScheduleOverlapPolicy.values)
        raise InvalidScheduleError(
            f"unknown overlap policy {value!r}; use one of {choices}"
        ) from None
