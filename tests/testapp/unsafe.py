"""Workflows that call the clock, randomness, the environment or I/O directly.

``CALLS`` maps a name to a function making one guarded call; ``tests.unsafe``
makes the call its argument names, in the body.
"""

from __future__ import annotations

import importlib
import logging
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import durable_workflow as dw
from durable_workflow import Workflow

logger = logging.getLogger("tests.unsafe")
TMP = tempfile.gettempdir()


def _write_file() -> Any:
    with open(os.path.join(TMP, "dw-guard-test"), "w") as out:
        return out.write("x")


def _connect() -> Any:
    with socket.socket() as sock:
        sock.settimeout(0.1)
        return sock.connect_ex(("127.0.0.1", 9))


def _cache() -> Any:
    from django.core.cache import cache

    return cache.get("dw-guard-test")


#: Every guarded call, as the error names it, with a function that makes it.
CALLS: dict[str, Callable[[], Any]] = {
    "time.time": lambda: time.time(),
    "time.time_ns": lambda: time.time_ns(),
    "time.monotonic": lambda: time.monotonic(),
    "time.perf_counter": lambda: time.perf_counter(),
    "time.sleep": lambda: time.sleep(0),
    "random.random": lambda: random.random(),
    "random.randint": lambda: random.randint(1, 6),
    "random.choice": lambda: random.choice("abc"),
    "random.shuffle": lambda: random.shuffle([1, 2, 3]),
    "uuid.uuid1": lambda: uuid.uuid1(),
    "uuid.uuid4": lambda: uuid.uuid4(),
    "os.urandom": lambda: os.urandom(4),
    "secrets.token_hex": lambda: secrets.token_hex(4),
    "secrets.choice": lambda: secrets.choice("abc"),
    "os.environ": lambda: os.environ.get("HOME"),
    "os.getpid": lambda: os.getpid(),
    "open": _write_file,
    "socket.connect": _connect,
    "subprocess.Popen": lambda: subprocess.run(["true"], check=False),
    "threading.Thread.start": lambda: threading.Thread(target=lambda: None).start(),
    "django.core.cache": _cache,
}


class Unsafe(Workflow):
    type_key = "tests.unsafe"
    abstract = False

    def handle(self, call: str) -> str:
        dw.timer(0)
        CALLS[call]()
        return "done"


class UnsafeWarned(Unsafe):
    type_key = "tests.unsafe-warned"
    unsafe_calls = "warn"


class UnsafeAllowed(Unsafe):
    type_key = "tests.unsafe-allowed"
    unsafe_calls = "allow"


class BranchesOnTheClock(Workflow):
    """The issue's example: a branch taken on ``time.time()`` across an activity."""

    type_key = "tests.branches-on-clock"
    abstract = False
    unsafe_calls = "allow"

    def handle(self) -> str:
        parity = "even" if int(time.time() * 1000) % 2 == 0 else "odd"
        dw.timer(0)
        dw.timer(0)
        return parity


class BranchesOnTheClockGuarded(BranchesOnTheClock):
    type_key = "tests.branches-on-clock-guarded"
    unsafe_calls = None


class SafeWorkflow(Workflow):
    """Logs, imports a module that reads the clock, and records values the durable way."""

    type_key = "tests.safe-calls"
    abstract = False

    def handle(self) -> dict[str, Any]:
        logger.info("starting at %s", dw.now())
        sys.modules.pop("tests.testapp.reads_clock", None)
        module = importlib.import_module("tests.testapp.reads_clock")
        seed = dw.side_effect(lambda: random.random())
        stamp = dw.side_effect(lambda: time.time())
        rolled = random.Random(42).randint(1, 6)  # a seeded generator replays the same
        return {
            "imported": module.LOADED_AT > 0,
            "seed": seed,
            "stamp": stamp,
            "rolled": rolled,
            "uuid": dw.uuid4(),
        }


class ClockInHandlers(Workflow):
    """Reads the clock in a signal handler, a query or a wait predicate, on demand."""

    type_key = "tests.clock-in-handlers"
    abstract = False
    signals = ["poke"]

    def __init__(self) -> None:
        self.where = ""
        self.pokes = 0

    @dw.signal("poke")
    def poke(self, where: str) -> None:
        self.where = where
        self.pokes += 1
        if where == "signal":
            time.time()

    @dw.query("peek")
    def peek(self) -> int:
        if self.where == "query":
            time.time()
        return self.pokes

    def handle(self) -> int:
        dw.wait(lambda: self.pokes > 0 and (self.where != "predicate" or time.time() > 0))
        return self.pokes


class ClockViaHelper(Workflow):
    """Reads the clock through a helper of another module (the guard still sees it)."""

    type_key = "tests.clock-via-helper"
    abstract = False

    def handle(self) -> float:
        from tests.testapp import reads_clock

        return reads_clock.stamp()
