"""Inputs that arrive from outside the body: signals and updates.

Delivery happens on the hub greenlet, in history order. A signal goes to its
handler method if the workflow declares one, else to the oldest open wait for
it (or a buffer, see ``waits.py``). Handlers and updates run on greenlets of
their own, scheduled FIFO with the body; a failed handler fails the run, a
failed update only fails the update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import greenlet

from durable_workflow import interceptors
from durable_workflow.converter import signature_of
from durable_workflow.engine import failures
from durable_workflow.engine.commands import ApplySignal, ApplyUpdate, CompleteUpdate
from durable_workflow.engine.core import Core
from durable_workflow.engine.events import EventType, HistoryEvent
from durable_workflow.engine.scheduler import Abort
from durable_workflow.engine.waits import Waits
from durable_workflow.exceptions import NonDeterminismError
from durable_workflow.headers import stored


class Inbox:
    """Delivers signals and updates to the body of one run."""

    def __init__(self, core: Core, waits: Waits, instance: Callable[[], Any]) -> None:
        self._core = core
        self._waits = waits
        self._instance = instance  # the workflow instance, once the body built it
        #: Signal and update handlers started and not finished (``all_handlers_finished``).
        self.unfinished = 0
        #: Updates whose handler started and has not finished: id -> name.
        self.running_updates: dict[str, str] = {}

    def all_finished(self) -> bool:
        """``dw.all_handlers_finished()``: no handler is running, suspended ones included."""
        return self.unfinished == 0

    def unfinished_updates(self, not_delivered: list[HistoryEvent]) -> list[tuple[str, str, bool]]:
        """(id, name, started) of the updates left open: handlers still running, and
        accepted updates in ``not_delivered`` (fed after the body decided to end)."""
        started = [(uid, name, True) for uid, name in self.running_updates.items()]
        waiting = [
            (str(e.payload["update_id"]), str(e.payload["update_name"]), False)
            for e in not_delivered
            if e.event_type == EventType.UPDATE_ACCEPTED
        ]
        return started + waiting

    def deliver_signal(self, payload: dict[str, Any]) -> None:
        core = self._core
        name = str(payload["signal_name"])
        signal_id = str(payload["signal_id"])
        instance = self._instance()
        handlers = getattr(type(instance), "_dw_signal_handlers", {})
        if name not in handlers:
            arguments = list(core.payloads.decode(payload.get("arguments")) or [])
            self._waits.deliver_signal(name, signal_id, arguments)
            return
        plain = core.payloads.decode_plain(payload.get("arguments"))
        self.unfinished += 1
        core.scheduler.spawn(
            self._run_handler, getattr(instance, handlers[name]), plain, name, stored(payload)
        )
        core.outbox.mark(
            ("signal", signal_id),
            ApplySignal(
                step=core.ledger.step, signal_id=signal_id, signal_name=name, by_handler=True
            ),
        )

    def _typed(self, fn: Callable[..., Any], plain: Any) -> list[Any]:
        """Plain arguments as the handler's parameters declare them. Called on the
        handler's greenlet, so a misfit fails the handler, like an error in its body."""
        return self._core.payloads.typed_arguments(plain, signature_of(fn))

    def _run_handler(
        self, method: Callable[..., Any], plain: Any, name: str, headers: dict[str, str]
    ) -> None:
        try:
            args = self._typed(getattr(method, "__func__", method), plain)
            interceptors.call(
                "handle_signal",
                interceptors.HandleSignalInput(self._instance(), name, args, headers),
                lambda input: method(*input.args),
            )
        except Abort:
            return
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:
            self._core.body_failed(exc)
        finally:
            self.unfinished -= 1

    def deliver_update(self, payload: dict[str, Any]) -> None:
        core = self._core
        name = str(payload["update_name"])
        update_id = str(payload["update_id"])
        handler = getattr(type(self._instance()), "_dw_updates", {}).get(name)
        if handler is None:
            raise NonDeterminismError(
                core.ledger.step,
                f"UpdateAccepted({name})",
                None,
                "the workflow no longer declares it",
            )
        plain = core.payloads.decode_plain(payload.get("arguments"))
        self.unfinished += 1
        self.running_updates[update_id] = name
        core.scheduler.spawn(self._run_update, update_id, name, handler.fn, plain, stored(payload))

    def _run_update(
        self,
        update_id: str,
        name: str,
        fn: Callable[..., Any],
        plain: Any,
        headers: dict[str, str],
    ) -> None:
        outbox = self._core.outbox
        outbox.mark(
            ("update_applied", update_id),
            ApplyUpdate(update_id=update_id, update_name=name, step=self._core.ledger.step),
        )
        done = ("update_completed", update_id)
        try:
            args = self._typed(fn, plain)
            value = interceptors.call(
                "handle_update",
                interceptors.HandleUpdateInput(self._instance(), name, update_id, args, headers),
                lambda input: fn(input.workflow, *input.args),
            )
            result = self._core.payloads.encode(value, "update result")
        except Abort:
            return
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:  # a failed update leaves the run open
            outbox.mark(done, CompleteUpdate(update_id, name, failure=failures.describe(exc)))
            return
        finally:
            self.unfinished -= 1
            self.running_updates.pop(update_id, None)
        outbox.mark(done, CompleteUpdate(update_id, name, result=result))
