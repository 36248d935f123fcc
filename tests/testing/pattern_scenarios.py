"""The everyday patterns of issue 21 as scenarios (driven like those of ``scenarios.py``).

Each runs in fake mode and against a real Celery worker (test_fake_vs_real.py),
records a golden history (tests/replay), and is replayed warm, cold and after
every workflow task (tests/integration/test_patterns_replay.py).
"""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import WorkflowStub

#: Scenario functions take a driver (``start``, ``settle``, ``sleep``) and an instance id.


def start_child_handle(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.patterns.starts-children", iid, "signal")


def child_handles_in_select(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.patterns.starts-children", iid, "select")


def child_handle_cancel(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.patterns.starts-children", iid, "cancel")


def child_instance_id(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.patterns.starts-children", iid, "named")


def named_child(output: Any, stub: WorkflowStub) -> Any:
    return {"own_id": output[0] == f"{stub.id()}-named", "result": output[1]}


def child_instance_id_taken(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.patterns.starts-children", iid, "taken")


def external_signal(d: Any, iid: str) -> WorkflowStub:
    d.start("tests.approval", f"{iid}-target", "signal")
    return d.start("tests.patterns.messenger", iid, f"{iid}-target", "signal")


def external_cancel(d: Any, iid: str) -> WorkflowStub:
    d.start("tests.cancellable", f"{iid}-target", "timer")
    return d.start("tests.patterns.messenger", iid, f"{iid}-target", "cancel")


def workflow_info(d: Any, iid: str) -> WorkflowStub:
    return d.start("tests.patterns.introspects", iid)


def info_shape(output: Any, stub: WorkflowStub) -> Any:
    ids = output["ids"]
    activity = dict(output["activity"])
    instance_id, workflow_type = activity["workflow"]
    activity["workflow"] = [instance_id == stub.id(), workflow_type]
    return {
        "ids": [ids[0] == stub.id(), ids[1] == stub.run_id(), ids[2], ids[3]],
        "grew": output["lengths"][0] < output["lengths"][1],
        "memo": output["memo"],
        "activity": activity,
        "child_parent": output["child_parent"] == [stub.id(), stub.run_id()],
    }


def update_with_start(d: Any, iid: str) -> WorkflowStub:
    stub = WorkflowStub.make("tests.approval", iid)
    for count, item in enumerate(("a", "b", "c"), start=1):
        submitted = stub.submit_update_with_start("add-item", item, start_args=["updates"])
        assert submitted.update is not None and submitted.update.update_id is not None
        d.settle()
        assert stub.inspect_update(submitted.update.update_id).result == count
    return stub


def handlers_lock(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.patterns.guarded", iid)
    for tag in ("a", "b", "c"):  # a takes the lock; b and c queue behind it
        stub.submit_update("gated", tag)
        d.settle()
    stub.submit_update("finish")
    d.settle()
    for tag in ("c", "a", "b"):  # c is let out first, but only gets the lock after b
        stub.submit_update("open", tag)
        d.settle()
    return stub


def handlers_semaphore(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.patterns.guarded", iid)
    for tag in ("a", "b", "c"):  # a and b take the two permits; c queues behind them
        stub.submit_update("gated-pair", tag)
        d.settle()
    stub.submit_update("finish")
    d.settle()
    for tag in ("c", "b", "a"):  # c is let out first, but only gets a permit once b leaves
        stub.submit_update("open", tag)
        d.settle()
    return stub


def async_completion(d: Any, iid: str) -> WorkflowStub:
    from tests.testapp.models import Invocation

    stub = d.start("tests.patterns.awaits-outside-work", iid, iid)
    token = Invocation.objects.get(name=f"deferred:{iid}").key
    dw.activity_completion(token).heartbeat({"message": "with a human"})
    dw.activity_completion(token).complete({"approved": True})
    d.settle()
    return stub


def subsecond_timers(d: Any, iid: str) -> WorkflowStub:
    stub = d.start("tests.patterns.short-naps", iid, 0.2, 3)
    for _ in range(3):
        d.sleep(0.25)
    return stub


def never_early(output: Any, stub: WorkflowStub) -> Any:
    return output >= 0.6  # exactly 0.6 in fake mode; a little more with a real worker


def schedule_manual_trigger(d: Any, iid: str) -> WorkflowStub:
    from durable_workflow.schedules import ScheduleManager

    ScheduleManager.create(
        schedule_id=iid, workflow="tests.sleeper", cron_expression="0 0 1 1 *", arguments=[1]
    )
    instance_id = ScheduleManager.trigger(iid)
    assert instance_id is not None
    d.settle()
    d.sleep(1.2)
    return WorkflowStub.load(instance_id)


def slept(output: Any, stub: WorkflowStub) -> Any:
    return output.startswith("slept ") and stub.id().startswith("schedule:")


def scenarios() -> list[Any]:
    from tests.testing.scenarios import Scenario

    return [
        Scenario("start-child-handle", start_child_handle),
        Scenario("child-handles-in-select", child_handles_in_select),
        Scenario("child-handle-cancel", child_handle_cancel),
        Scenario("child-instance-id", child_instance_id, named_child),
        Scenario("child-instance-id-taken", child_instance_id_taken),
        Scenario("external-signal", external_signal),
        Scenario("external-cancel", external_cancel),
        Scenario("workflow-info", workflow_info, info_shape),
        Scenario("update-with-start", update_with_start),
        Scenario("handlers-lock", handlers_lock),
        Scenario("handlers-semaphore", handlers_semaphore),
        Scenario("async-completion", async_completion),
        Scenario("subsecond-timers", subsecond_timers, never_early),
        Scenario("schedule-manual-trigger", schedule_manual_trigger, slept),
    ]
