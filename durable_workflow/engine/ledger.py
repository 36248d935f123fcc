"""The determinism ledger: what history says, matched against the body step by step.

The ledger indexes history events as they are fed and answers, for the body,
the one question replay depends on: *is the step I am about to take the one
history recorded?* ``claim(signature)`` takes the next step number and raises
``NonDeterminismError`` when history holds a different command there. It also
keeps the facts recorded once and recognised on replay (markers), version
markers, what history says of local activities (attempts, outcomes), the
deterministic clock and the events delivered so far.

It never touches greenlets or futures: the runtime acts on what it reports.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Hashable, Iterable
from typing import Any

from durable_workflow.engine.events import (
    COMMAND_EVENTS,
    RESOLUTION_EVENTS,
    EventType,
    HistoryEvent,
)
from durable_workflow.engine.signatures import (
    MARKER_KEYS,
    SIGNATURE_OF_EVENT,
    Signature,
    describe_signature,
    signature_of,
)
from durable_workflow.exceptions import NonDeterminismError

_NEVER_REACHED = "history holds a step the code never reached"


class DeterminismLedger:
    """History of one run as the body must replay it (see the module docstring)."""

    def __init__(self) -> None:
        #: The last step claimed by the body.
        self.step = 0
        #: The sequence of the last event delivered.
        self.last_sequence = 0
        #: The deterministic clock: the time of the event being delivered.
        self.now: dt.datetime | None = None
        #: The workflow definition fingerprint the run started on.
        self.started_fingerprint: str | None = None
        #: The run's ``WorkflowStarted`` event, once delivered (``dw.info()`` reads it).
        self.started: HistoryEvent | None = None
        self._recorded: dict[int, HistoryEvent] = {}
        self._issued: dict[int, Signature] = {}
        #: Steps history recorded that the body has not taken yet (recorded, not issued).
        self._unreached: set[int] = set()
        self._markers: set[Hashable] = set()
        self._versions: dict[str, dict[str, Any]] = {}
        # Local activities: what history says of each one's attempts and outcome.
        self._local_outcomes: dict[int, HistoryEvent] = {}
        self._local_started: dict[int, int] = {}
        self._local_retried: dict[int, tuple[int, str | None]] = {}
        self._child_runs: dict[int, str] = {}
        #: The events delivered to the body so far (the feed appends each one).
        self.seen: list[HistoryEvent] = []
        self._sizes = (0, 0)  # (events measured, their payload bytes)
        #: History closed the run as failed (a query, or a replay, of a failed run).
        self.failed_in_history = False

    # -------------------------------------------------------------- indexing
    def index(self, events: Iterable[HistoryEvent]) -> list[HistoryEvent]:
        """Learn what ``events`` record; returns the local-activity outcomes among them."""
        local_outcomes: list[HistoryEvent] = []
        markers, issued, recorded = self._markers, self._issued, self._recorded
        unreached = self._unreached
        for event in events:  # the cold-replay hot loop: kept flat on purpose
            kind = event.event_type
            payload = event.payload
            marker = MARKER_KEYS.get(kind)
            if marker is not None:
                markers.add(marker(payload))
            elif payload.get("local_activity"):
                if self._index_local(event):
                    local_outcomes.append(event)
            elif kind in COMMAND_EVENTS:
                step = event.step
                if step is None or (
                    kind == EventType.TIMER_SCHEDULED and payload.get("timer_kind")
                ):
                    continue  # a wait's deadline belongs to that wait's step
                if step in issued:
                    self._verify(step, event)
                else:
                    recorded[step] = event
                    unreached.add(step)
            elif kind == EventType.VERSION_MARKER_RECORDED:
                change_id = str(payload.get("change_id"))
                self._versions[change_id] = dict(payload)
                markers.add(("version", change_id))
            elif kind == EventType.ACTIVITY_CANCELLED and payload.get("selection_group_id"):
                markers.add(("sel_cancel", event.step))
            elif kind == EventType.WORKFLOW_FAILED:
                self.failed_in_history = True
        return local_outcomes

    def _index_local(self, event: HistoryEvent) -> bool:
        """Index one local-activity event; True if it is the activity's outcome."""
        step = event.step
        if step is None:
            return False
        kind = event.event_type
        if kind == EventType.ACTIVITY_SCHEDULED:
            if step in self._issued:
                self._verify(step, event)
            else:
                self._recorded[step] = event
                self._unreached.add(step)
        elif kind == EventType.ACTIVITY_STARTED:
            self._local_started[step] = int(event.payload.get("attempt_number", 1))
        elif kind == EventType.ACTIVITY_RETRY_SCHEDULED:
            self._local_retried[step] = (
                int(event.payload.get("attempt_number", 1)),
                event.payload.get("retry_reason") or "failure",
            )
        elif kind in RESOLUTION_EVENTS:
            self._local_outcomes[step] = event
            return True
        return False

    def _verify(self, step: int, event: HistoryEvent) -> None:
        """History recorded ``event`` at a step the body already took: they must agree."""
        recorded = signature_of(event)
        if recorded != self._issued[step]:
            raise NonDeterminismError(
                step, describe_signature(recorded), describe_signature(self._issued[step])
            )

    # -------------------------------------------------------------- claiming
    def claim(self, sig: Signature) -> tuple[int, HistoryEvent | None]:
        """Take the next step for a call of ``sig``: its number and what history recorded."""
        self.step += 1
        step = self.step
        recorded = self._recorded.get(step)
        if recorded is not None:
            recorded_sig = SIGNATURE_OF_EVENT[recorded.event_type](recorded.payload)
            if recorded_sig != sig:
                raise NonDeterminismError(
                    step, describe_signature(recorded_sig), describe_signature(sig)
                )
        self._issued[step] = sig
        self._unreached.discard(step)
        return step, recorded

    def steps_before(self, step: int, count: int = 5) -> tuple[str, ...]:
        """The last ``count`` steps history recorded before ``step``, described."""
        earlier = sorted(s for s in self._recorded if s < step)[-count:]
        return tuple(
            f"step {s} {describe_signature(signature_of(self._recorded[s]))}" for s in earlier
        )

    def recorded(self, step: int) -> HistoryEvent | None:
        return self._recorded.get(step)

    def holds_steps_after(self, step: int) -> bool:
        """True if history recorded a command past ``step`` (the run went further)."""
        return any(recorded > step for recorded in self._recorded)

    def never_reached(self, step: int, event: HistoryEvent) -> NonDeterminismError:
        """The error for an outcome in history of a step the body never took."""
        command = self._recorded.get(step)
        recorded = (
            describe_signature(signature_of(command)) if command is not None else event.event_type
        )
        return NonDeterminismError(step, str(recorded), None, _NEVER_REACHED)

    def check_all_reached(self) -> None:
        """Raise if history holds a command at a step the body did not reach."""
        if self._unreached:  # kept as steps are recorded and taken: no walk of the run
            step = min(self._unreached)
            recorded = signature_of(self._recorded[step])
            raise NonDeterminismError(step, describe_signature(recorded), None, _NEVER_REACHED)

    # ----------------------------------------------------------------- facts
    def first_time(self, key: Hashable) -> bool:
        """True (and remembered) unless the fact ``key`` was already recorded."""
        if key in self._markers:
            return False
        self._markers.add(key)
        return True

    def version_marker(self, change_id: str) -> dict[str, Any] | None:
        return self._versions.get(change_id)

    def note_version(self, change_id: str, marker: dict[str, Any]) -> None:
        self._versions[change_id] = marker

    def note_child_run(self, step: int, run_id: str) -> None:
        """History says the child started at ``step`` runs as ``run_id`` (as delivered)."""
        self._child_runs[step] = run_id

    def child_run_id(self, step: int) -> str | None:
        return self._child_runs.get(step)

    def local_outcome(self, step: int) -> HistoryEvent | None:
        return self._local_outcomes.get(step)

    def local_attempt(self, step: int) -> tuple[int, str | None]:
        """The next attempt of a local activity and why it runs again (if it does)."""
        started = self._local_started.get(step, 0)
        retried = self._local_retried.get(step)
        if retried is not None and retried[0] >= started:
            reason = retried[1]
        else:
            reason = "cold_replay" if started else None
        return started + 1, reason

    # --------------------------------------------------------------- budget
    def history_length(self) -> int:
        """Events up to the one being delivered: the same value on every replay."""
        return self.seen[-1].sequence if self.seen else 0

    def history_size(self) -> int:
        """Payload bytes of the events up to the one being delivered (deterministic)."""
        counted, size = self._sizes
        for event in self.seen[counted:]:
            size += len(json.dumps(event.payload, separators=(",", ":")))
        self._sizes = (len(self.seen), size)
        return size
