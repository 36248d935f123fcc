"""Workflows and activities that run inside worker sessions."""

from __future__ import annotations

import os
import time
from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from durable_workflow.executor.identity import worker_id
from tests.testapp.models import Invocation


class WhereAmI(Activity):
    """Says which worker process ran it."""

    type_key = "tests.session-where"

    def handle(self, label: Any) -> dict[str, Any]:
        Invocation.objects.create(
            name="session-where", key=self.activity_id(), attempt=self.attempt_count()
        )
        return {"label": label, "worker": worker_id(), "pid": os.getpid()}


class SessionSleepy(Activity):
    """Heartbeats while it sleeps on its first attempt (a worker is killed meanwhile)."""

    type_key = "tests.session-sleepy"

    def handle(self, seconds: float) -> dict[str, Any]:
        Invocation.objects.create(
            name="session-sleepy", key=self.activity_id(), attempt=self.attempt_count()
        )
        if self.attempt_count() == 1:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                self.heartbeat()
                time.sleep(0.2)
        return {"worker": worker_id(), "attempt": self.attempt_count()}


def _options(options: dict[str, Any] | None) -> dw.WorkerSessionOptions:
    return dw.WorkerSessionOptions(**(options or {}))


class SessionSteps(Workflow):
    type_key = "tests.session-steps"

    def handle(self, count: int, options: dict[str, Any] | None = None, session_id: str = "s1"):
        session = dw.worker_session(session_id, _options(options))
        return [session.activity(WhereAmI, index) for index in range(count)]


class SessionParallel(Workflow):
    type_key = "tests.session-parallel"

    def handle(self, count: int, options: dict[str, Any] | None = None, session_id: str = "s1"):
        session = dw.worker_session(session_id, _options(options))
        return dw.all([lambda i=i: session.activity(WhereAmI, i) for i in range(count)])


class SessionRefused(Workflow):
    """Reports an in-session activity its session refused for good."""

    type_key = "tests.session-refused"

    def handle(self, session_id: str) -> dict[str, Any]:
        session = dw.worker_session(session_id)
        try:
            return session.activity(WhereAmI, "never")
        except dw.WorkerSessionRejected as exc:
            return {"rejected": exc.reason, "failed": isinstance(exc, dw.ActivityFailed)}


class SessionHolderLoss(Workflow):
    """Three in-session steps; the holder is killed during the second."""

    type_key = "tests.session-holder-loss"

    def handle(self, seconds: float, options: dict[str, Any] | None = None) -> list[Any]:
        session = dw.worker_session("render", _options(options))
        first = session.activity(WhereAmI, "first")
        second = session.activity(SessionSleepy, seconds)
        third = session.activity(WhereAmI, "third")
        return [first, second, third]


class SessionRounds(Workflow):
    """One in-session step per round; waits for ``next`` between rounds, and either
    continues as new into the next round or starts it in the same run."""

    type_key = "tests.session-rounds"
    signals = ["next"]

    def handle(self, session_id: str, rounds: int = 1, continue_as_new: bool = False):
        session = dw.worker_session(session_id)
        done = [session.activity(WhereAmI, rounds)]
        if rounds > 1:
            dw.wait_signal("next")
            if continue_as_new:
                dw.continue_as_new(session_id, rounds - 1, True)
            done.append(session.activity(WhereAmI, rounds - 1))
        return done
