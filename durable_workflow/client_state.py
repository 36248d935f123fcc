"""What a ``WorkflowStub`` says of its run as it last read it: ids, status, how it
closed, its output. Nothing here reads the database (``refresh()`` does), so none of
it has an awaitable twin."""

from __future__ import annotations

import datetime as dt
from typing import Any, Generic

from durable_workflow.authoring.protocols import R
from durable_workflow.client_messages import workflow_class_or_none
from durable_workflow.converter import CLIENT, handle_signature, payloads
from durable_workflow.models import TERMINAL_RUN_STATUSES, RunStatus
from durable_workflow.store.records import RunRecord


class StubState(Generic[R]):
    """Mixed into ``WorkflowStub``: the run it holds (pinned or current), as last read."""

    _instance_id: str
    _workflow_type: str
    _run: RunRecord | None

    def id(self) -> str:
        return self._instance_id

    def run_id(self) -> str | None:
        return str(self._run.id) if self._run else None

    def workflow_type(self) -> str:
        return self._workflow_type

    def status(self) -> str:
        return self._run.status if self._run else "reserved"

    def closed_reason(self) -> str | None:
        return self._run.closed_reason if self._run else None

    def running(self) -> bool:
        return self._run is not None and self._run.status not in TERMINAL_RUN_STATUSES

    def completed(self) -> bool:
        return self.status() == RunStatus.COMPLETED

    def failed(self) -> bool:
        return self.status() == RunStatus.FAILED

    def cancelled(self) -> bool:
        return self.status() == RunStatus.CANCELLED

    def terminated(self) -> bool:
        return self.status() == RunStatus.TERMINATED

    def archived_at(self) -> dt.datetime | None:
        """When the run was archived (``None``: it is not)."""
        return self._run.archived_at if self._run else None

    def output(self, *, result_type: Any = None) -> R | None:
        """The return value of a completed run (``None`` otherwise), decoded as the
        workflow's ``handle()`` declares (or as ``result_type=``)."""
        if self._run is None or self._run.output is None:
            return None
        hint = result_type or handle_signature(workflow_class_or_none(self._workflow_type)).result
        value: R = payloads.decode_value(
            self._run.output,
            hint,
            codec=self._run.payload_codec,
            root="result",
            receiver=CLIENT,
        )
        return value
