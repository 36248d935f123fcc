"""durable_workflow: durable workflows for Django, replayed from history, run by Celery.

Usage::

    import durable_workflow as dw
    from durable_workflow import Workflow, Activity, WorkflowStub
"""

from typing import TYPE_CHECKING, Any

from durable_workflow.authoring.activity import Activity, activity_info
from durable_workflow.authoring.composition import (
    all,
    child,
    continue_as_new,
    execute_child_workflow,
    parallel,
    run_async,
    select,
    start_child,
)
from durable_workflow.authoring.decorators import query, signal, update
from durable_workflow.authoring.handles import (
    ChildWorkflowHandle,
    ExternalWorkflowHandle,
    external_workflow,
)
from durable_workflow.authoring.helpers import (
    activity,
    days,
    deprecate_patch,
    execute_activity,
    execute_local_activity,
    get_version,
    hours,
    info,
    local_activity,
    minutes,
    months,
    now,
    patched,
    seconds,
    side_effect,
    timer,
    upsert_memo,
    upsert_search_attributes,
    uuid4,
    uuid7,
    wait,
    wait_signal,
    wait_with_timeout,
    weeks,
    years,
)
from durable_workflow.authoring.sessions import WorkerSessionHandle, worker_session
from durable_workflow.authoring.sync import Lock, Semaphore, all_handlers_finished
from durable_workflow.authoring.workflow import Workflow
from durable_workflow.converter import ModelRef, register_converter
from durable_workflow.description import WorkflowDescription
from durable_workflow.engine.selection import OperationHandle, SelectionResult
from durable_workflow.engine.versions import DEFAULT_VERSION
from durable_workflow.exceptions import (
    ActivityCancelled,
    ActivityCompletionRejected,
    ActivityFailed,
    ActivityTimeoutError,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    CommandRejected,
    CompleteAsync,
    ConfigurationError,
    DurableOperationCancelled,
    DurableWorkflowError,
    InvalidDurationError,
    InvalidInstanceIdError,
    InvalidValueError,
    MessageFailedError,
    ModelInstanceNotFoundError,
    NonDeterminismError,
    NonRetryableError,
    NotInActivityError,
    NotInWorkflowError,
    PayloadCodecError,
    QueryCommandError,
    QueryFailedError,
    QueryHandlerFailedError,
    QueryRejectedError,
    SignalFailedError,
    SignalRejectedError,
    StructuralLimitExceeded,
    UnknownTypeError,
    UpdateFailedError,
    UpdateHandlerFailedError,
    UpdateRejectedError,
    UpdateWaitTimedOutError,
    VersionNotSupported,
    WorkerSessionRejected,
    WorkflowAlreadyStartedError,
    WorkflowCancelled,
    WorkflowCancelledError,
    WorkflowClosedError,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowOrmAccessError,
    WorkflowParkedError,
    WorkflowResultTimeoutError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
)
from durable_workflow.info import ActivityInfo, WorkflowInfo
from durable_workflow.options import (
    ActivityOptions,
    ChildWorkflowOptions,
    DuplicateStartPolicy,
    LocalActivityOptions,
    ParentClosePolicy,
    StartOptions,
    WorkerSessionOptions,
)
from durable_workflow.results import (
    CommandResult,
    SignalWithStartResult,
    StartResult,
    UpdateResult,
    UpdateWithStartResult,
)

# The client needs the ORM models, which Django can only import once its app
# registry is ready; load it on first use so ``INSTALLED_APPS`` can name us.
_LAZY = {
    "WorkflowStub": "durable_workflow.client",
    "activity_completion": "durable_workflow.completions",
    "ActivityCompletionHandle": "durable_workflow.completions",
}

if TYPE_CHECKING:  # type checkers see the classes themselves
    from durable_workflow.client import WorkflowStub
    from durable_workflow.completions import ActivityCompletionHandle, activity_completion


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'durable_workflow' has no attribute {name!r}")


__all__ = [
    "DEFAULT_VERSION",
    "Activity",
    "ActivityCancelled",
    "ActivityCompletionHandle",
    "ActivityCompletionRejected",
    "ActivityFailed",
    "ActivityInfo",
    "ActivityOptions",
    "ActivityTimeoutError",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowHandle",
    "ChildWorkflowOptions",
    "ChildWorkflowTerminated",
    "CommandRejected",
    "CommandResult",
    "CompleteAsync",
    "ConfigurationError",
    "DuplicateStartPolicy",
    "DurableOperationCancelled",
    "DurableWorkflowError",
    "ExternalWorkflowHandle",
    "InvalidDurationError",
    "InvalidInstanceIdError",
    "InvalidValueError",
    "LocalActivityOptions",
    "Lock",
    "MessageFailedError",
    "ModelInstanceNotFoundError",
    "ModelRef",
    "NonDeterminismError",
    "NonRetryableError",
    "NotInActivityError",
    "NotInWorkflowError",
    "OperationHandle",
    "ParentClosePolicy",
    "PayloadCodecError",
    "QueryCommandError",
    "QueryFailedError",
    "QueryHandlerFailedError",
    "QueryRejectedError",
    "SelectionResult",
    "Semaphore",
    "SignalFailedError",
    "SignalRejectedError",
    "SignalWithStartResult",
    "StartOptions",
    "StartResult",
    "StructuralLimitExceeded",
    "UnknownTypeError",
    "UpdateFailedError",
    "UpdateHandlerFailedError",
    "UpdateRejectedError",
    "UpdateResult",
    "UpdateWaitTimedOutError",
    "UpdateWithStartResult",
    "VersionNotSupported",
    "WorkerSessionHandle",
    "WorkerSessionOptions",
    "WorkerSessionRejected",
    "Workflow",
    "WorkflowAlreadyStartedError",
    "WorkflowCancelled",
    "WorkflowCancelledError",
    "WorkflowClosedError",
    "WorkflowDescription",
    "WorkflowFailedError",
    "WorkflowInfo",
    "WorkflowNotFoundError",
    "WorkflowOrmAccessError",
    "WorkflowParkedError",
    "WorkflowResultTimeoutError",
    "WorkflowStub",
    "WorkflowTerminatedError",
    "WorkflowTimedOutError",
    "activity",
    "activity_completion",
    "activity_info",
    "all",
    "all_handlers_finished",
    "child",
    "continue_as_new",
    "days",
    "deprecate_patch",
    "execute_activity",
    "execute_child_workflow",
    "execute_local_activity",
    "external_workflow",
    "get_version",
    "hours",
    "info",
    "local_activity",
    "minutes",
    "months",
    "now",
    "parallel",
    "patched",
    "query",
    "register_converter",
    "run_async",
    "seconds",
    "select",
    "side_effect",
    "signal",
    "start_child",
    "timer",
    "update",
    "upsert_memo",
    "upsert_search_attributes",
    "uuid4",
    "uuid7",
    "wait",
    "wait_signal",
    "wait_with_timeout",
    "weeks",
    "worker_session",
    "years",
]
