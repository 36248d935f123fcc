"""One module per scenario of the issue; each exposes ``SCENARIO`` (a ``lab.Scenario``)."""

from __future__ import annotations

import importlib

from reliability.lab import Scenario

ORDER = ["kill", "broker", "database", "clock", "schedules", "poison", "soak"]


def load(name: str) -> Scenario:
    return importlib.import_module(f"reliability.scenarios.{name}").SCENARIO  # type: ignore[no-any-return]
