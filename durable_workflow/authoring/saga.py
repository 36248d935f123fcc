"""Saga compensation, mixed into ``Workflow``.

Register a compensation right after its forward step succeeds; ``compensate()``
runs them newest first. Each compensation is a zero-argument callable; for
``set_parallel_compensation(True)`` each must make one durable call (an
activity or child), since they then run as one ``all()`` group.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from durable_workflow.authoring import composition


def _swallowing(compensation: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        with contextlib.suppress(Exception):  # continue_with_error: failures are swallowed
            compensation()

    return run


class SagaMixin:
    def _saga(self) -> dict[str, Any]:
        state = self.__dict__.get("_dw_saga")
        if state is None:
            state = self.__dict__["_dw_saga"] = {
                "compensations": [],
                "parallel": False,
                "continue_with_error": False,
            }
        return state

    def add_compensation(self, compensation: Callable[[], Any]) -> SagaMixin:
        if not callable(compensation):
            raise TypeError("add_compensation() takes a zero-argument callable")
        self._saga()["compensations"].append(compensation)
        return self

    def set_parallel_compensation(self, parallel: bool = True) -> SagaMixin:
        self._saga()["parallel"] = bool(parallel)
        return self

    def set_continue_with_error(self, continue_with_error: bool = True) -> SagaMixin:
        self._saga()["continue_with_error"] = bool(continue_with_error)
        return self

    def compensate(self) -> None:
        """Run the registered compensations in reverse order of registration.

        By default the first failing compensation propagates and the rest are
        skipped; with ``set_continue_with_error(True)`` every compensation runs
        and failures are swallowed.
        """
        saga = self._saga()
        pending = list(reversed(saga["compensations"]))
        if not pending:
            return
        if saga["parallel"] and saga["continue_with_error"]:
            # Every compensation must finish even if some fail: run each as a branch
            # that swallows its own failure, and wait for all of them.
            branches: list[Callable[[], Any]] = [
                functools.partial(composition.run_async, _swallowing(c)) for c in pending
            ]
            composition.all(branches)
            return
        if saga["parallel"]:
            composition.all(pending)
            return
        for compensation in pending:
            try:
                compensation()
            except Exception:
                if not saga["continue_with_error"]:
                    raise
