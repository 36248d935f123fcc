"""A rolling deploy with compatibility markers: two builds of workers on one queue.

The old build's workers run marker ``build-a``; the new build's run ``build-b``
and support only it, so neither build ever claims the other's runs although
both consume the same queue. Then the old cohort is stopped: a run still
stamped ``build-a`` waits for a compatible worker (not stuck), until a worker
of a cohort that supports both markers comes up and finishes it.
"""

from __future__ import annotations

import pytest

from durable_workflow import WorkflowStub, compatibility
from durable_workflow.models import HistoryEvent, Task, WorkerRegistration, WorkflowRun
from durable_workflow.operations.doctor import DoctorContext
from durable_workflow.operations.doctor.compatibility import check_worker_compatibility
from tests.acceptance.conftest import wait_for
from tests.integration.helpers import build

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

A, B = "build-a", "build-b"


def worker_env(current: str, supported: str = "") -> dict[str, str]:
    return {
        "DW_COMPATIBILITY_CURRENT": current,
        "DW_COMPATIBILITY_SUPPORTED": supported,
        "DW_WORKER_HEARTBEAT_SECONDS": "1",
    }


def start_runs(marker: str, prefix: str) -> list[WorkflowStub]:
    stubs = []
    with build(marker):  # a web process of that build starts them
        for index in range(3):
            steps = WorkflowStub.make("tests.many-steps", f"{prefix}-steps-{index}")
            steps.start(3)
            sleeper = WorkflowStub.make("tests.sleeper", f"{prefix}-sleep-{index}")
            sleeper.start(1)
            stubs += [steps, sleeper]
    return stubs


def claimers(run_id: str) -> set[str]:
    owners = set(
        Task.objects.filter(run_id=run_id, lease_owner__isnull=False).values_list(
            "lease_owner", flat=True
        )
    )
    started = HistoryEvent.objects.filter(run_id=run_id, event_type="ActivityStarted")
    return owners | {event.payload["lease_owner"] for event in started}


def assert_only_supporters_claimed(stubs: list[WorkflowStub]) -> set[str]:
    supported = dict(WorkerRegistration.objects.values_list("worker_id", "compatibility"))
    seen: set[str] = set()
    for stub in stubs:
        marker = WorkflowRun.objects.get(pk=stub.run_id()).compatibility
        for owner in claimers(stub.run_id()):
            assert owner in supported, f"{owner} is not a registered worker"
            assert compatibility.supports(supported[owner], marker), (stub.id(), owner, marker)
            seen.add(owner)
    return seen


def test_two_builds_on_one_queue_only_run_their_own_runs(start_worker):
    old = start_worker(env=worker_env(A))
    new = start_worker(env=worker_env(B))
    wait_for(lambda: WorkerRegistration.objects.count() == 2, timeout=20, message="registrations")
    registered = dict(WorkerRegistration.objects.values_list("worker_id", "compatibility"))
    assert sorted(registered.values()) == [[A], [B]]

    old_runs, new_runs = start_runs(A, "roll-a"), start_runs(B, "roll-b")
    for stub in old_runs + new_runs:
        stub.wait(timeout=90)
        assert stub.refresh().completed(), (stub.id(), [e.event_type for e in stub.history()])
    old_claimers = assert_only_supporters_claimed(old_runs)
    new_claimers = assert_only_supporters_claimed(new_runs)
    assert len(old_claimers) == len(new_claimers) == 1 and old_claimers != new_claimers
    kinds = set(Task.objects.values_list("task_type", flat=True))
    assert kinds == {"workflow", "activity", "timer"}
    # Both builds consume one queue, so some messages reached the wrong build and were
    # handed back rather than claimed.
    logs = old.output() + new.output()
    assert "handed back for" in logs

    old.stop()  # the old cohort drains away; a straggler run of build-a is left behind
    straggler = start_runs(A, "roll-late")[:1]
    with build(B):
        check = check_worker_compatibility(DoctorContext())
    assert check.status == "warning" and "waiting for a compatible worker" in check.message
    assert check.details["blocked_markers"] == [A]

    start_worker(env=worker_env(B, f"{B},{A}"))  # a cohort that still runs build-a
    straggler[0].wait(timeout=90)
    assert straggler[0].refresh().completed()
    late_claimers = assert_only_supporters_claimed(straggler)
    assert late_claimers and not late_claimers & (old_claimers | new_claimers)
    assert "no live worker supports it" in new.output()  # while nobody ran build-a
