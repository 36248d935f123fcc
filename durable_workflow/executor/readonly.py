"""Read-only replays: queries and update validators.

Both replay the history a workflow task has already processed (inputs that
arrived since are not applied yet) into a fresh instance, with every write and
every durable helper refused.
"""

from __future__ import annotations

import traceback as tb
from collections.abc import Callable
from typing import Any

from durable_workflow import contracts, interceptors, registry
from durable_workflow.converter import WORKFLOW, arguments_from_plain, signature_of
from durable_workflow.engine import gcpause
from durable_workflow.engine.failures import class_path
from durable_workflow.engine.runtime import WorkflowRuntime
from durable_workflow.exceptions import (
    PayloadCodecError,
    QueryHandlerFailedError,
    QueryRejectedError,
    UnknownTypeError,
)
from durable_workflow.executor import hooks
from durable_workflow.executor.common import failure_types, orm_guard
from durable_workflow.headers import check_headers
from durable_workflow.store import history
from durable_workflow.store.records import RunRecord
from durable_workflow.text import check_name, text_of


def replay_committed(run: RunRecord) -> WorkflowRuntime:
    """A runtime holding the run's state as of its last workflow task."""
    try:
        cls: Any = hooks.workflow_class(run.workflow_type)
    except UnknownTypeError:
        raise QueryRejectedError(
            "workflow_definition_unavailable",
            f"Workflow {run.id} [{run.instance_id}] cannot be replayed because the workflow "
            f"definition is unavailable for durable type [{run.workflow_type}].",
        ) from None
    runtime = WorkflowRuntime(
        factory=lambda: cls._dw_instantiate(runtime),
        workflow_id=run.instance_id,
        run_id=str(run.id),
        codec=run.payload_codec,
        workflow_class=cls,
    )
    runtime.failure_types = failure_types()
    runtime.enter_query_mode()
    # Before the first workflow task, StartAccepted (1) and WorkflowStarted (2) suffice.
    up_to = run.workflow_task_sequence or 2
    with gcpause.paused_for(up_to):
        events = history.load_history(run.id, up_to=up_to)
        with orm_guard():
            runtime.feed(events)
    return runtime


class CallFailed(Exception):
    """The called method raised; ``__cause__`` is what it raised."""


def call_on_replayed(run: RunRecord, call: Callable[[Any], Any]) -> Any:
    """Replay, then run ``call(instance)`` where durable helpers are refused.

    Replay errors propagate as they are; an exception from ``call`` itself is
    wrapped in ``CallFailed``.
    """
    runtime = replay_committed(run)
    with orm_guard():
        try:
            return runtime.query(lambda: call(runtime.instance), [])
        except Exception as exc:
            raise CallFailed(text_of(exc)) from exc
        finally:
            runtime.dispose()


def query_method(run: RunRecord, name: str) -> tuple[str, str]:
    """(durable name, attribute) of a query, addressed by durable or method name."""
    cls = registry.workflow_class(run.workflow_type)
    queries: dict[str, str] = getattr(cls, "_dw_queries", {})
    if name in queries:
        return name, queries[name]
    for public, attr in queries.items():
        if attr == name:
            return public, attr
    raise QueryRejectedError(
        "rejected_unknown_query",
        f"Workflow [{run.workflow_type}] has no query [{name}].",
        name=name,
    )


def run_query(
    run: RunRecord, name: str, arguments: Any, *, headers: dict[str, str] | None = None
) -> tuple[str, Any]:
    """Answer a query against committed history; returns (durable name, result).
    The workflow's inbound interceptors see it (``handle_query``) with ``headers``."""
    check_name(name, field="query name")
    headers = check_headers(headers)
    try:
        public, attr = query_method(run, name)
    except UnknownTypeError:
        replay_committed(run)  # raises the workflow_definition_unavailable error
        raise
    cls = registry.workflow_class(run.workflow_type)
    method = getattr(cls, attr)
    try:
        values = contracts.bind_signature(method, arguments)
        # Plain values (a webhook's JSON, the client's converted arguments) into the
        # types the query method declares, as a workflow body would receive them.
        values = arguments_from_plain(values, signature_of(method), receiver=WORKFLOW)
    except (contracts.ArgumentsInvalid, PayloadCodecError) as exc:
        errors = getattr(exc, "errors", None) or {"arguments": [str(exc)]}
        raise QueryRejectedError(
            "invalid_query_arguments",
            f"Workflow query [{public}] received invalid arguments.",
            name=public,
            validation_errors=errors,
        ) from None
    try:
        return public, call_on_replayed(
            run,
            lambda instance: interceptors.call(
                "handle_query",
                interceptors.HandleQueryInput(instance, public, list(values), headers),
                lambda input: getattr(input.workflow, attr)(*input.args),
            ),
        )
    except CallFailed as exc:
        cause = exc.__cause__
        assert cause is not None
        raise QueryHandlerFailedError(
            "query_rejected",
            f"query [{public}] failed: {type(cause).__name__}: {text_of(cause)}",
            name=public,
            exception_type=type(cause).__name__,
            exception_class=class_path(type(cause)),
            failure_message=text_of(cause),
            traceback="".join(tb.format_exception(cause)),
        ) from cause
