"""Workflows and activities the library's own tests run."""

from __future__ import annotations

import logging
import time
from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, ActivityFailed, ActivityOptions, NonRetryableError, Workflow
from tests.testapp.models import Invocation

#: Tests flip these to simulate a code change between two workflow tasks.
CODE_VERSION = {"sequential": 1}


def record(activity: Activity, name: str) -> int:
    Invocation.objects.create(
        name=name, key=activity.activity_id(), attempt=activity.attempt_count()
    )
    return Invocation.objects.filter(name=name, key=activity.activity_id()).count()


class Greet(Activity):
    type_key = "tests.greet"

    def handle(self, name: str) -> str:
        record(self, "greet")
        return f"hello {name}"


class Add(Activity):
    type_key = "tests.add"

    def handle(self, a: int, b: int) -> int:
        record(self, "add")
        return a + b


class Describe(Activity):
    """Returns what the activity knows about itself."""

    type_key = "tests.describe"

    def handle(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id(),
            "run_id": self.run_id(),
            "activity_id": self.activity_id(),
            "attempt_id": self.attempt_id(),
            "attempt_count": self.attempt_count(),
        }


class PaymentDeclined(Exception):
    pass


class Flaky(Activity):
    """Fails until its ``succeed_on`` attempt."""

    type_key = "tests.flaky"
    tries = 3

    def backoff(self) -> list[int]:
        return [0]

    def handle(self, succeed_on: int) -> str:
        calls = record(self, "flaky")
        logging.getLogger("tests.activities").info("flaky call %s", calls)
        if calls < succeed_on:
            raise PaymentDeclined(f"attempt {calls} declined")
        return f"ok after {calls}"


class Declined(NonRetryableError):
    type_key = "tests.declined"


class Refuse(Activity):
    type_key = "tests.refuse"
    tries = 5

    def backoff(self) -> int:
        return 0

    def handle(self) -> None:
        record(self, "refuse")
        raise Declined("card refused for good")


class Sleepy(Activity):
    """Sleeps on its first attempt only; used to kill a worker mid-activity."""

    type_key = "tests.sleepy"

    def handle(self, seconds: float) -> str:
        attempt = record(self, "sleepy")
        if attempt == 1:
            time.sleep(seconds)
        return f"woke on attempt {attempt}"


class Sequential(Workflow):
    type_key = "tests.sequential"

    def handle(self, name: str) -> list[Any]:
        greeting = dw.activity(Greet, name)
        if CODE_VERSION["sequential"] == 2:
            dw.timer(5)
        total = dw.activity(Add, 1, 2)
        return [greeting, total]


class ManySteps(Workflow):
    type_key = "tests.many-steps"

    def handle(self, count: int) -> int:
        total = 0
        for index in range(count):
            total = dw.activity(Add, total, index)
        return total


class Identity(Workflow):
    type_key = "tests.identity"

    def handle(self) -> dict[str, Any]:
        inside = dw.activity(Describe)
        return {"activity": inside, "workflow_id": self.workflow_id(), "run_id": self.run_id()}


class Retrying(Workflow):
    type_key = "tests.retrying"

    def handle(self, succeed_on: int, max_attempts: int | None = None) -> str:
        logging.getLogger("tests.workflows").info("retrying until call %s", succeed_on)
        if max_attempts is not None:
            return dw.activity(Flaky, ActivityOptions(max_attempts=max_attempts), succeed_on)
        return dw.activity(Flaky, succeed_on)


class CatchFailure(Workflow):
    type_key = "tests.catch-failure"

    def handle(self) -> dict[str, Any]:
        try:
            dw.activity(Flaky, ActivityOptions(max_attempts=1), 99)
        except PaymentDeclined as exc:
            caught = {"type": type(exc).__name__, "message": str(exc)}
            caught["is_activity_failed"] = isinstance(exc, ActivityFailed)
        return {"caught": caught, "after": dw.activity(Add, 2, 3)}


class NonRetryable(Workflow):
    type_key = "tests.non-retryable"

    def handle(self) -> None:
        dw.activity(Refuse)


class Sleeper(Workflow):
    type_key = "tests.sleeper"

    def handle(self, seconds: int) -> str:
        started = dw.now()
        dw.timer(seconds)
        return f"slept {(dw.now() - started).total_seconds():.0f}"


class Inline(Workflow):
    type_key = "tests.inline"

    def handle(self) -> dict[str, Any]:
        first = dw.side_effect(lambda: time.time_ns())
        dw.timer(0)
        uid = dw.uuid4()
        return {"first": first, "uuid": uid, "uuid7": dw.uuid7()}


class TouchesOrm(Workflow):
    type_key = "tests.touches-orm"

    def handle(self) -> int:
        try:
            return Invocation.objects.count()
        except Exception:
            return -1  # swallowing it must not help: the task still fails


class TouchesAlias(Workflow):
    """Runs a query on the database alias it is given, whether or not its connection is
    open yet, and swallows what that raises."""

    type_key = "tests.touches-alias"

    def handle(self, alias: str) -> int:
        from django.db import connections

        try:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT 1")
            return 1
        except Exception:
            return -1


class TouchesAliasWarned(TouchesAlias):
    type_key = "tests.touches-alias-warned"
    unsafe_calls = "warn"


class TouchesAliasAllowed(TouchesAlias):
    type_key = "tests.touches-alias-allowed"
    unsafe_calls = "allow"


class Crashes(Workflow):
    type_key = "tests.crashes"
    failure_exception_types = [ValueError]  # a business failure here, declared

    def handle(self, message: str) -> None:
        raise ValueError(message)


class KillMe(Workflow):
    type_key = "tests.kill-me"

    def handle(self, seconds: float) -> list[Any]:
        first = dw.activity(Greet, "before")
        slow = dw.activity(Sleepy, seconds)
        last = dw.activity(Add, 20, 22)
        return [first, slow, last]


from tests.testapp.messaging import Approval, Handlers  # noqa: E402,F401  (registers them)


class Heartbeating(Activity):
    """Beats until cancelled (or ``beats`` times)."""

    type_key = "tests.heartbeating"

    def handle(self, beats: int) -> int:
        for index in range(beats):
            try:
                self.heartbeat({"current": index, "unit": "beats"})
            except dw.ActivityCancelled:
                record(self, "saw-cancel")
                raise
            time.sleep(0.01)
        return beats


class Cancellable(Workflow):
    type_key = "tests.cancellable"

    def handle(self, mode: str) -> str:
        if mode == "timer":
            dw.timer(3600)
            return "slept"
        if mode == "activity":
            return str(dw.activity(Heartbeating, 100000))
        if mode == "cleanup":
            try:
                dw.timer(3600)
            except dw.WorkflowCancelled:
                dw.activity(Greet, "cleanup")
                raise
        if mode == "swallow":
            try:
                dw.timer(3600)
            except dw.WorkflowCancelled:
                return "ignored the cancel"
        raise ValueError(mode)


# The other test workflow modules register their classes when imported.
from tests.testapp import (  # noqa: E402
    async_activities,  # noqa: F401
    async_client,  # noqa: F401
    composition,  # noqa: F401
    data_goldens,  # noqa: F401
    data_types,  # noqa: F401
    gate,  # noqa: F401
    hostile,  # noqa: F401
    messaging,  # noqa: F401
    patterns,  # noqa: F401
    queues,  # noqa: F401
    rewind,  # noqa: F401
    sessions,  # noqa: F401
    tenancy,  # noqa: F401
    testing_workflows,  # noqa: F401
    traced,  # noqa: F401
    unsafe,  # noqa: F401
    versioned,  # noqa: F401
    webhook_workflows,  # noqa: F401
    workflow_queues,  # noqa: F401
)
