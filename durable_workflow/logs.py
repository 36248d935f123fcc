"""Which workflow a log line is about, as fields of the record.

Every record the engine's loggers write carries five attributes, so a JSON
formatter (``durable_workflow.operations.log_format.JsonFormatter``) writes them
as keys and logs can be filtered by workflow:

``dw_workflow_type``, ``dw_instance_id``, ``dw_run_id``
    the run the line is about;
``dw_activity_id``, ``dw_attempt``
    the activity execution and its attempt number, in an activity attempt.

A field the engine does not know where the line is written is ``None``. The
values come from a context variable: the executor opens a :func:`scope` around a
workflow task, an activity attempt, a timer, and each run the repair pass or the
schedule ticker handles, and :func:`bind` adds the run once it is read. Nothing
is computed until a record is actually emitted.

:class:`WorkflowContextFilter` may also be put on a handler (``LOGGING``'s
``filters``), so the lines an activity or a workflow body logs through its own
loggers carry the same fields.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Protocol

FIELDS = ("dw_workflow_type", "dw_instance_id", "dw_run_id", "dw_activity_id", "dw_attempt")

_EMPTY: dict[str, Any] = {}
_current: ContextVar[dict[str, Any]] = ContextVar("durable_workflow_log_fields", default=_EMPTY)


class RunLike(Protocol):
    @property
    def id(self) -> Any: ...
    @property
    def instance_id(self) -> str: ...
    @property
    def workflow_type(self) -> str: ...


class AttemptLike(Protocol):
    @property
    def workflow_type(self) -> str: ...
    @property
    def instance_id(self) -> str: ...
    @property
    def run_id(self) -> Any: ...
    @property
    def execution(self) -> Any: ...
    @property
    def attempt_number(self) -> int: ...


class WorkflowContextFilter(logging.Filter):
    """Adds the current workflow's fields to a record; a field given as ``extra=``
    is kept. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _current.get()
        attributes = record.__dict__
        for name in FIELDS:
            if name not in attributes:
                attributes[name] = fields.get(name)
        return True


_FILTER = WorkflowContextFilter()


def get_logger(name: str = "durable_workflow") -> logging.Logger:
    """The named logger, with :class:`WorkflowContextFilter` on it (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, WorkflowContextFilter) for f in logger.filters):
        logger.addFilter(_FILTER)
    return logger


def _named(
    run: RunLike | None,
    *,
    workflow_type: str | None = None,
    instance_id: str | None = None,
    run_id: Any = None,
    activity_id: Any = None,
    attempt: int | None = None,
) -> dict[str, Any]:
    if run is not None:
        workflow_type = workflow_type or run.workflow_type or None
        instance_id = instance_id or run.instance_id
        run_id = run_id or run.id
    given = {
        "dw_workflow_type": workflow_type,
        "dw_instance_id": instance_id,
        "dw_run_id": None if run_id is None else str(run_id),
        "dw_activity_id": None if activity_id is None else str(activity_id),
        "dw_attempt": attempt,
    }
    return {name: value for name, value in given.items() if value is not None}


@contextlib.contextmanager
def scope(run: RunLike | None = None, **known: Any) -> Iterator[None]:
    """Lines logged inside carry ``run``'s fields and ``known`` (``workflow_type``,
    ``instance_id``, ``run_id``, ``activity_id``, ``attempt``) on top of the
    enclosing scope's; :func:`bind` inside adds to this scope only."""
    token = _current.set({**_current.get(), **_named(run, **known)})
    try:
        yield
    finally:
        _current.reset(token)


@contextlib.contextmanager
def run_scope(run: RunLike) -> Iterator[None]:
    """A scope of ``run`` alone: no activity or attempt of an enclosing scope (a
    workflow task run in place of the activity attempt that woke it)."""
    token = _current.set(_named(run))
    try:
        yield
    finally:
        _current.reset(token)


def attempt_scope(lease: AttemptLike) -> contextlib.AbstractContextManager[None]:
    """:func:`scope` of one activity attempt (a queued or a local activity's lease)."""
    return scope(
        workflow_type=lease.workflow_type,
        instance_id=lease.instance_id,
        run_id=lease.run_id,
        activity_id=lease.execution.id,
        attempt=lease.attempt_number,
    )


def bind(run: RunLike | None = None, **known: Any) -> None:
    """Add fields to the innermost :func:`scope` (outside any scope: nothing, so a
    long-lived process never keeps one workflow's fields)."""
    fields = _current.get()
    if fields is not _EMPTY:
        fields.update(_named(run, **known))


def current() -> dict[str, Any]:
    """The fields lines logged here would carry (for tests and diagnostics)."""
    return {name: _current.get().get(name) for name in FIELDS}
