"""Every I/O method of the client has an awaitable twin (a new one fails here until it
has one, or is listed as answering from what the stub already holds)."""

from __future__ import annotations

import inspect

from durable_workflow.client import WorkflowStub
from durable_workflow.client_testing import StubTesting
from durable_workflow.completions import ActivityCompletionHandle

#: Read what the stub holds since its last refresh: no I/O, no twin.
NO_IO = {
    "id",
    "run_id",
    "workflow_type",
    "status",
    "closed_reason",
    "running",
    "completed",
    "failed",
    "cancelled",
    "terminated",
    "output",
    "archived_at",
    "with_headers",
}
#: Twins that are classmethods (written out, to keep ``make``'s overloads typed).
CLASS_TWINS = {"amake": "make", "aload": "load", "aload_run": "load_run"}


def twin_name(name: str) -> str:
    return "await_" if name == "wait" else f"a{name}"


def public_methods(cls: type, exclude: type | None = None) -> set[str]:
    kit = set(dir(exclude)) if exclude else set()
    return {
        name
        for name in dir(cls)
        if not name.startswith("_") and callable(getattr(cls, name)) and name not in kit
    }


def twins_of(cls: type) -> dict[str, str]:
    found = {
        name: getattr(cls, name).__dw_twin_of__
        for name in dir(cls)
        if hasattr(getattr(cls, name), "__dw_twin_of__")
    }
    return found


def test_every_stub_method_that_does_io_has_a_twin():
    twins = {**twins_of(WorkflowStub), **CLASS_TWINS}
    for twin, source in twins.items():
        assert twin == twin_name(source)
        assert inspect.iscoroutinefunction(getattr(WorkflowStub, twin)), twin
    methods = public_methods(WorkflowStub, exclude=StubTesting) - set(twins)
    assert methods - NO_IO == set(twins.values())


def test_every_activity_completion_report_has_a_twin():
    twins = twins_of(ActivityCompletionHandle)
    assert public_methods(ActivityCompletionHandle) - set(twins) == set(twins.values())


def test_twins_name_and_document_what_they_run():
    assert WorkflowStub.aresult.__qualname__ == "WorkflowStub.aresult"
    assert WorkflowStub.asignal.__qualname__ == "StubMessages.asignal"
    assert "``result()`` as a coroutine" in (WorkflowStub.aresult.__doc__ or "")


def test_every_schedule_manager_method_has_a_twin():
    from durable_workflow.schedules import ScheduleManager

    twins = twins_of(ScheduleManager)
    for twin in twins:
        assert inspect.iscoroutinefunction(getattr(ScheduleManager, twin)), twin
    assert public_methods(ScheduleManager) - set(twins) == set(twins.values())
