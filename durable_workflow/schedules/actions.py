"""What a schedule starts: a registered workflow type and its arguments."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from django.utils.module_loading import import_string

from durable_workflow import registry
from durable_workflow.conf import get_settings
from durable_workflow.converter import payloads
from durable_workflow.engine.failures import class_path
from durable_workflow.exceptions import DurableWorkflowError, UnknownTypeError
from durable_workflow.schedules.errors import InvalidScheduleError, UnknownScheduleWorkflowError

if TYPE_CHECKING:
    from durable_workflow.authoring.workflow import Workflow

    WorkflowClass = type[Workflow[Any, Any]]


@dataclass(frozen=True)
class Action:
    workflow_type: str
    workflow_class: str
    #: The positional arguments as a codec envelope (encoded once, at definition time).
    arguments: dict[str, str]


def resolve_workflow(workflow: type | str) -> WorkflowClass:
    """The registered workflow class for a class, a type key or a dotted class path."""
    if isinstance(workflow, type):
        key = getattr(workflow, "type_key", None)
        if not key:
            raise UnknownScheduleWorkflowError(f"{workflow!r} is not a Workflow subclass")
        workflow = str(key)
    if not isinstance(workflow, str) or not workflow.strip():
        raise UnknownScheduleWorkflowError(f"expected a workflow class or type key: {workflow!r}")
    try:
        # The registry holds only Workflow subclasses (they register themselves).
        return cast("WorkflowClass", registry.workflow_class(workflow))
    except UnknownTypeError as exc:
        cls = _import_class(workflow)
        if cls is None:
            raise UnknownScheduleWorkflowError(str(exc)) from None
        return resolve_workflow(cls)


def _import_class(path: str) -> type | None:
    if "." not in path:
        return None
    try:
        found = import_string(path)
    except ImportError:
        return None
    return found if isinstance(found, type) and getattr(found, "type_key", None) else None


def build_action(workflow: type | str, arguments: list[Any] | dict[str, Any] | None) -> Action:
    cls = resolve_workflow(workflow)
    positional = _positional(cls, arguments)
    try:
        encoded = payloads.encode_arguments(positional, get_settings().PAYLOAD_CODEC)
    except DurableWorkflowError as exc:
        raise InvalidScheduleError(f"the schedule's arguments cannot be encoded: {exc}") from exc
    return Action(
        workflow_type=str(cls.type_key), workflow_class=class_path(cls), arguments=encoded
    )


def action_from_dict(action: Any) -> Action:
    """The spec's ``{workflow_type, workflow_class, input}`` form."""
    if not isinstance(action, dict):
        raise InvalidScheduleError(f"a schedule action must be a dict, not {action!r}")
    unknown = sorted(set(action) - {"workflow_type", "workflow_class", "input"})
    if unknown:
        raise InvalidScheduleError(f"unknown schedule action keys: {', '.join(unknown)}")
    workflow = action.get("workflow_type") or action.get("workflow_class")
    if not workflow:
        raise InvalidScheduleError("a schedule action needs 'workflow_type' (or 'workflow_class')")
    built = build_action(workflow, action.get("input"))
    named_class = action.get("workflow_class")
    if named_class and action.get("workflow_type"):
        other = resolve_workflow(named_class)
        if other.type_key != built.workflow_type:
            raise InvalidScheduleError(
                f"workflow_class {named_class!r} has type key {other.type_key!r}, "
                f"not {built.workflow_type!r}"
            )
    return built


def _positional(
    cls: WorkflowClass, arguments: list[Any] | tuple[Any, ...] | dict[str, Any] | None
) -> list[Any]:
    if arguments is None:
        return []
    if isinstance(arguments, list | tuple):
        return list(arguments)
    if not isinstance(arguments, dict):
        raise InvalidScheduleError(f"arguments must be a list or a dict, not {arguments!r}")
    # A named map is put in handle()'s declaration order, defaults filled in.
    signature = inspect.signature(cls.handle)
    try:
        bound = signature.bind(None, **arguments)
    except TypeError as exc:
        raise InvalidScheduleError(f"arguments do not fit {cls.__name__}.handle(): {exc}") from None
    bound.apply_defaults()
    return list(bound.args[1:])
