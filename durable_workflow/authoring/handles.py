"""Handles on child workflows, for ``last_child()`` / ``children()`` in a workflow body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_workflow.engine.steps import child_instance_id

if TYPE_CHECKING:
    from durable_workflow.engine.runtime import WorkflowRuntime


class ChildWorkflowHandle:
    """A child started by this run, addressed by its stable instance id."""

    def __init__(self, runtime: WorkflowRuntime, step: int) -> None:
        self._runtime = runtime
        self._step = step

    def __repr__(self) -> str:
        return f"<ChildWorkflowHandle {self.id()}>"

    def id(self) -> str:
        """The child's instance id (stable across its continue-as-new)."""
        return child_instance_id(self._runtime.run_id, self._step)

    def run_id(self) -> str | None:
        """The newest child run the parent's history has seen."""
        return self._runtime.child_run_id(self._step)

    def call_id(self) -> int:
        return self._step

    def signal(self, name: str, *args: Any) -> None:
        """Signal the child (a durable step of this workflow)."""
        self._runtime.signal_child(self.id(), name, list(args))

    def signal_with_arguments(self, name: str, arguments: list[Any] | dict[str, Any]) -> None:
        """Signal the child with a positional list or a named map of arguments."""
        values = list(arguments.values()) if isinstance(arguments, dict) else list(arguments)
        self._runtime.signal_child(self.id(), name, values)
