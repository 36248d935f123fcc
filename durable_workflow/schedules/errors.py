"""Errors the schedule API raises; all under ``DurableWorkflowError``."""

from __future__ import annotations

from durable_workflow.exceptions import ConfigurationError, DurableWorkflowError, UnknownTypeError


class ScheduleError(DurableWorkflowError):
    """Root of every schedule error."""


class InvalidScheduleError(ScheduleError, ConfigurationError, ValueError):
    """A schedule definition is invalid; nothing was written."""


class InvalidCronExpressionError(InvalidScheduleError):
    """A cron expression does not parse, has the wrong field count, or never fires."""


class InvalidTimezoneError(InvalidScheduleError):
    """The timezone is not a known IANA zone name."""


class UnknownScheduleWorkflowError(InvalidScheduleError, UnknownTypeError):
    """The schedule's workflow type is not registered."""


class ScheduleAlreadyExistsError(ScheduleError):
    """A schedule with this id already exists in the namespace (deleted ones included)."""


class ScheduleNotFoundError(ScheduleError, LookupError):
    """No schedule has this id in the namespace."""


class ScheduleDeletedError(ScheduleError):
    """The schedule is deleted: it cannot be paused, resumed, updated or backfilled."""
