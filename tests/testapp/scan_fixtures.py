"""Workflow classes for the boot-time scan: one with planted calls, one clean.

They are abstract (never registered): the scan tests hand them to it directly.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from datetime import datetime
from random import choice

import durable_workflow as dw
from durable_workflow import Workflow

SEEN: list[str] = []
COUNTS: dict[str, int] = {}
TOTAL = 0
LIMIT = 10  # a constant: reading it is fine


class Planted(Workflow):
    abstract = True
    signals = ["poke"]

    def handle(self, name: str) -> str:
        started = time.time()  # planted: time.time
        today = datetime.now()  # planted: datetime.now
        later = dt.datetime.utcnow()  # planted: datetime.utcnow
        pick = choice(["a", "b"])  # planted: random.choice
        home = os.environ["HOME"]  # planted: os.environ
        SEEN.append(name)  # planted: module state SEEN
        COUNTS[name] = COUNTS.get(name, 0) + 1  # planted: module state COUNTS
        return f"{started}{today}{later}{pick}{home}{LIMIT}"

    @dw.signal("poke")
    def poke(self) -> None:
        global TOTAL  # planted: module state TOTAL
        TOTAL += 1
        os.getenv("X")  # planted: os.getenv


class Clean(Workflow):
    abstract = True

    def handle(self, name: str) -> str:
        seen: list[str] = []
        seen.append(name)
        now = dw.now()
        seed = dw.side_effect(lambda: time.time())
        rolled = __import__("random").Random(7).randint(1, 6)
        return f"{now}{seed}{rolled}{LIMIT}{dw.uuid4()}"
