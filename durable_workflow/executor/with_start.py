"""What a signal- or update-with-start shares: the group naming its commands, the
instance lock two deliveries of one request queue on, the start it records in the
group, and the start linked to a command of the group."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from durable_workflow.executor.start import StartOutcome, start_workflow
from durable_workflow.ids import validate_instance_id
from durable_workflow.models import CommandStatus, CommandType
from durable_workflow.options import StartOptions
from durable_workflow.store import commands, runs


@dataclasses.dataclass(frozen=True)
class WithStart:
    """One signal- or update-with-start: the instance, the asker, the payload fields
    naming the group of its commands, the namespace and the moment."""

    instance_id: str
    workflow_type: str
    source: str
    group: dict[str, Any]
    namespace: str
    now: dt.datetime

    def reserve(self) -> None:
        """Reserve the instance (a command refused before any start still names it)."""
        runs.reserve_instance(
            self.instance_id, self.workflow_type, namespace=self.namespace, now=self.now
        )


def start_in_group(
    request: WithStart,
    *,
    workflow_class: str,
    arguments: list[Any],
    options: StartOptions,
    queue: str | None,
    connection: str | None,
) -> StartOutcome:
    """``start_workflow`` for the request, its command recorded in the request's group."""
    return start_workflow(
        instance_id=request.instance_id,
        workflow_type=request.workflow_type,
        workflow_class=workflow_class,
        arguments=arguments,
        options=options,
        queue=queue,
        connection=connection,
        source=request.source,
        command_metadata=request.group,
        namespace=request.namespace,
    )


def intake_group(mode: str, request_id: str | None) -> dict[str, Any]:
    """What the commands of one signal- or update-with-start record in their payload to
    name each other (``linked_start`` reads it back)."""
    group: dict[str, Any] = {"intake_group_id": str(uuid.uuid4()), "intake_mode": mode}
    if request_id is not None:
        group["request_id"] = request_id
    return group


def lock_for_request(
    instance_id: str, workflow_type: str, *, namespace: str, now: dt.datetime
) -> None:
    """Reserve and lock the instance row, which two deliveries of one request queue on
    before either looks for the other's command."""
    validate_instance_id(instance_id)
    runs.reserve_instance(instance_id, workflow_type, namespace=namespace, now=now)
    runs.lock_instance(instance_id, namespace=namespace)


def linked_start(instance_id: str, prior: commands.PriorCommand) -> StartOutcome | None:
    """The start command recorded with ``prior`` by one signal- or update-with-start
    (``None`` when ``prior`` was not part of one, or nothing was started)."""
    group_id = prior.payload.get("intake_group_id")
    if not isinstance(group_id, str):
        return None
    start = commands.command_in_group(instance_id, CommandType.START, group_id)
    if start is None:
        return None
    return StartOutcome(
        accepted=start.status == CommandStatus.ACCEPTED,
        outcome=start.outcome,
        command_id=start.id,
        instance_id=start.instance_id,
        run_id=start.run_id,
        rejection_reason=start.rejection_reason,
    )
