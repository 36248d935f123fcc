"""Workflows and activities that raise hostile or unprintable errors (issue 18)."""

from __future__ import annotations

from typing import Any

import durable_workflow as dw
from durable_workflow import Activity, ActivityOptions, Workflow
from tests.testapp.models import Invocation

#: Error texts a database refuses as they are: a NUL byte (PostgreSQL text and JSON) and
#: a lone surrogate (not encodable as UTF-8 at all).
HOSTILE = {"nul": "card\x00declined", "surrogate": "card \udcff declined"}


class Unprintable(Exception):
    """An exception whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


def hostile_error(mode: str) -> Exception:
    if mode == "unprintable":
        return Unprintable()
    return ValueError(HOSTILE[mode])


class RaiseHostile(Activity):
    type_key = "tests.raise-hostile"

    def backoff(self) -> list[int]:
        return [0]

    def handle(self, mode: str) -> None:
        Invocation.objects.create(name="hostile", key=self.activity_id())
        raise hostile_error(mode)


class HostileActivity(Workflow):
    type_key = "tests.hostile-activity"

    def handle(self, mode: str, tries: int = 2) -> Any:
        return dw.activity(RaiseHostile, ActivityOptions(max_attempts=tries), mode)


class HostileBody(Workflow):
    """Fails with a hostile error: a business failure (declared below) or caught first."""

    type_key = "tests.hostile-body"
    failure_exception_types = [ValueError, Unprintable]

    def handle(self, mode: str) -> Any:
        if mode.startswith("caught-"):
            try:
                dw.activity(RaiseHostile, ActivityOptions(max_attempts=1), mode[7:])
            except dw.ActivityFailed:
                return "caught"
        raise hostile_error(mode)


class HostileUpdates(Workflow):
    """An update whose validator raises a hostile error, and one whose handler does."""

    type_key = "tests.hostile-updates"

    def __init__(self) -> None:
        self.done = False

    @dw.update("check")
    def check(self, mode: str) -> str:
        return mode

    @check.validator
    def _refuse(self, mode: str) -> None:
        raise hostile_error(mode)

    @dw.update("poke")
    def poke(self, mode: str) -> None:
        raise hostile_error(mode)

    @dw.update("finish")
    def finish(self) -> None:
        self.done = True

    def handle(self) -> str:
        dw.wait(lambda: self.done)
        return "done"


#: Tests flip this to "fixed" to deploy the fix of ``Buggy``.
BUGGY = {"code": "broken"}


class Buggy(Workflow):
    """A body with a bug after its first step: it parks, and a fix plus a repair saves it."""

    type_key = "tests.buggy"

    def handle(self, kind: str) -> Any:
        from tests.testapp.workflows import Add

        first = dw.activity(Add, 1, 1)
        if BUGGY["code"] == "fixed":
            return first
        if kind == "name":
            return undefined_name  # type: ignore[name-defined]  # noqa: F821
        if kind == "type":
            return first + "1"
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "exit":
            raise SystemExit(3)
        if kind == "nonretryable":
            raise dw.NonRetryableError("declared final")
        raise ValueError(kind)


class Interrupted(Activity):
    """Raises ``KeyboardInterrupt``/``SystemExit`` (or another ``BaseException``) on its
    first attempt, then succeeds."""

    type_key = "tests.interrupted"

    def backoff(self) -> list[int]:
        return [0]

    def handle(self, kind: str) -> str:
        Invocation.objects.create(name="interrupted", key=self.activity_id())
        if Invocation.objects.filter(name="interrupted", key=self.activity_id()).count() == 1:
            raise {"interrupt": KeyboardInterrupt, "exit": SystemExit, "other": Halt}[kind]()
        return f"done on attempt {self.attempt_count()}"


class Halt(BaseException):
    """A ``BaseException`` that is not an interrupt: an activity failure like any other."""


class InterruptedActivity(Workflow):
    type_key = "tests.interrupted-activity"

    def handle(self, kind: str) -> str:
        return dw.activity(Interrupted, ActivityOptions(max_attempts=2), kind)


class InterruptedOnce(Workflow):
    """Its body raises ``KeyboardInterrupt``/``SystemExit`` once: when ``INTERRUPT_BODY`` is
    armed (in this process) or the file ``flag`` exists (in a worker; it is removed)."""

    type_key = "tests.interrupted-once"

    def handle(self, kind: str, flag: str | None = None) -> str:
        import os

        from tests.testapp.workflows import Add

        armed = INTERRUPT_BODY["armed"] or bool(flag and os.path.exists(flag))
        if armed:
            INTERRUPT_BODY["armed"] = False
            if flag and os.path.exists(flag):
                os.remove(flag)
            raise KeyboardInterrupt if kind == "interrupt" else SystemExit(2)
        return str(dw.activity(Add, 2, 3))


#: Tests arm it; the next ``InterruptedOnce`` body disarms it as it raises.
INTERRUPT_BODY = {"armed": False}


class Crashing(Workflow):
    """Its body makes the worker process exit at once, every time (a poison task); each
    attempt first appends a line to ``trace`` (a file: the body may not use the ORM)."""

    type_key = "tests.crashing"
    unsafe_calls = "allow"  # it writes a file and kills its worker on purpose

    def handle(self, trace: str) -> None:
        import os

        with open(trace, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        os._exit(17)


class CrashingAfterStep(Workflow):
    """Runs one activity, then its body makes the worker process exit, on every replay:
    the workflow task the activity's result wakes is the poison one (the reliability
    suite's poison workflow). Each body run after the activity appends a line to
    ``trace``."""

    type_key = "tests.crashing-after-step"
    unsafe_calls = "allow"  # it writes a file and kills its worker on purpose

    def handle(self, trace: str) -> None:
        import os

        from tests.testapp.workflows import Add

        dw.activity(Add, 2, 3)
        with open(trace, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        os._exit(17)
