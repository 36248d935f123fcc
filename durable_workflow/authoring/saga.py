"""Saga compensation, mixed into ``Workflow``.

Register a compensation right after its forward step succeeds; ``compensate()``
runs them newest first. Each compensation is a zero-argument callable; for
``set_parallel_compensation(True)`` each must make one durable call (an
activity or child), since they then run as one ``all()`` group.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from durable_workflow.authoring import composition


def _collecting(compensation: Callable[[], Any], failed: list[Exception]) -> Callable[[], None]:
    def run() -> None:
        try:
            compensation()
        except Exception as error:  # continue_with_error: kept for the caller, not raised
            failed.append(error)

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

    def compensate(self) -> list[Exception]:
        """Run the registered compensations in reverse order of registration.

        By default the first failing compensation propagates and the rest are
        skipped. With ``set_continue_with_error(True)`` every compensation runs to
        its end (in parallel too: this returns once all of them finished) and the
        failures are returned, in the order they happened, instead of raised.
        """
        saga = self._saga()
        pending = list(reversed(saga["compensations"]))
        failed: list[Exception] = []
        if not pending:
            return failed
        if saga["parallel"] and saga["continue_with_error"]:
            # Every compensation must finish even if some fail: run each as a branch
            # that keeps its own failure, and wait for all of them.
            branches: list[Callable[[], Any]] = [
                functools.partial(composition.run_async, _collecting(c, failed)) for c in pending
            ]
            composition.all(branches)
            return failed
        if saga["parallel"]:
            composition.all(pending)
            return failed
        for compensation in pending:
            try:
                compensation()
            except Exception as error:
                if not saga["continue_with_error"]:
                    raise
                failed.append(error)
        return failed
