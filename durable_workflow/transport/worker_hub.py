"""How many due timers a Celery worker starts per turn of its event loop.

This module is the one place the engine changes how a Celery worker runs, and it
goes through Celery's public bootsteps API. Celery keeps a countdown message (the
engine sends every timer as one) in the worker's kombu hub until it is due. The hub
runs at most ten due entries per turn of its event loop
(``Hub.fire_timers(max_timers=10)``) and then polls the broker for up to a second,
so a worker that holds many due messages and receives nothing else starts about ten
of them a second (``docs/performance.md``, due timers).

``connect()`` adds :class:`TimersPerTurn` to the app of every worker that loads the
engine (``worker_init`` is sent before the worker builds its steps). The step binds
``max_timers=WORKER_TIMERS_PER_TURN`` to the public ``fire_timers`` method of that
worker's hub, on the instance, before the event loop is created: ``Hub.create_loop``
looks ``fire_timers`` up once, when it starts. Kombu's class is left alone.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from celery import bootsteps, signals

from durable_workflow.conf import get_settings
from durable_workflow.logs import get_logger

logger = get_logger("durable_workflow")

_state = {"connected": False}


def raise_timers_per_turn(hub: Any, per_turn: int | None) -> int | None:
    """Make ``hub`` run up to ``per_turn`` due timer entries per loop turn.

    Returns the limit now in force, or ``None`` when kombu's own stays: ``per_turn``
    is 0 or ``None``, or this kombu's ``fire_timers`` takes no ``max_timers``.
    """
    if not per_turn:
        return None
    method = getattr(hub.fire_timers, "func", hub.fire_timers)  # ours already: rebind
    if "max_timers" not in inspect.signature(method).parameters:
        logger.warning(
            "kombu's Hub.fire_timers takes no max_timers here; the worker keeps kombu's "
            "own limit of due timers per loop turn (WORKER_TIMERS_PER_TURN ignored)"
        )
        return None
    hub.fire_timers = functools.partial(method, max_timers=per_turn)
    return per_turn


class TimersPerTurn(bootsteps.Step):
    """Worker bootstep: the worker's hub fires ``WORKER_TIMERS_PER_TURN`` due timers a turn."""

    # After the hub exists; the consumer creates the event loop later, when it starts.
    requires = ("celery.worker.components:Hub",)

    def create(self, w: Any) -> None:
        hub = getattr(w, "hub", None)
        if hub is None:
            logger.info(
                "due timers: this worker runs no kombu event loop (its pool or broker "
                "transport has none); WORKER_TIMERS_PER_TURN does not apply"
            )
            return
        in_force = raise_timers_per_turn(hub, get_settings().WORKER_TIMERS_PER_TURN)
        if in_force is None:
            logger.info("due timers: kombu's own limit per turn of the worker's event loop")
        else:
            logger.info(
                "due timers: up to %d per turn of the worker's event loop (WORKER_TIMERS_PER_TURN)",
                in_force,
            )


def _on_worker_init(sender: Any = None, **kwargs: Any) -> None:
    app = getattr(sender, "app", None)
    if app is not None:
        app.steps["worker"].add(TimersPerTurn)


def connect() -> None:
    """Add the step to every worker started in this process (idempotent)."""
    if _state["connected"]:
        return
    _state["connected"] = True
    signals.worker_init.connect(_on_worker_init, weak=False)
