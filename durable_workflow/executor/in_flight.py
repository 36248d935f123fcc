"""May a ready task's message still be on its way? What the repair pass asks the broker
before it takes a message for lost (``repair.py``).

A message is on its way while it waits in its queue, maybe behind a backlog, or while
a worker has taken it and not acknowledged it yet: a countdown message (a timer, a
retry's back-off) is taken at once and kept until it is due and has run. The dispatch
backend says both when it can (``waiting`` and ``held``; ``transport/celery.py``). A
worker that died holding messages keeps them from the queue until the broker gives
them back (kombu's visibility timeout, an hour by default), so held messages count
only while no registered worker that may have taken them has gone silent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Container

from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch
from durable_workflow.store import workers
from durable_workflow.store.records import TaskRecord

_UNREAD = object()


class InFlight:
    """The broker's answers for one repair pass: each queue counted and each
    connection's held messages read at most once."""

    def __init__(self, *, now: dt.datetime) -> None:
        backend = dispatch.backend()
        self._now = now
        self._count = getattr(backend, "waiting", None)
        self._holding = getattr(backend, "held", None)
        self._depths: dict[tuple[str | None, str | None], int | None] = {}
        self._held: dict[str | None, Container[str] | None] = {}
        self._silent_beat: object = _UNREAD

    def may_be(self, task: TaskRecord, *, sent_at: dt.datetime) -> bool:
        """Is ``task``'s message, sent at ``sent_at``, perhaps still on its way? ``False``
        also when the broker cannot say."""
        routed = dispatch.routed(task)
        key = (routed.connection, routed.queue)
        if key not in self._depths:
            self._depths[key] = self._count(routed) if self._count is not None else None
        if self._depths[key]:
            return True
        if routed.connection not in self._held:
            held = self._holding(routed) if self._holding is not None else None
            self._held[routed.connection] = held
        held = self._held[routed.connection]
        return held is not None and str(task.id) in held and not self._holder_may_be_dead(sent_at)

    def _holder_may_be_dead(self, sent_at: dt.datetime) -> bool:
        """Has a registered worker gone silent that was alive when the message was sent
        (and so may have taken it)? Its last heartbeat is then no older than one
        staleness period before the send."""
        stale_after = get_settings().WORKER_STALE_AFTER_SECONDS
        if self._silent_beat is _UNREAD:
            self._silent_beat = workers.last_beat_of_the_silent(
                now=self._now, stale_after=stale_after
            )
        beat = self._silent_beat
        return isinstance(beat, dt.datetime) and beat >= sent_at - dt.timedelta(seconds=stale_after)
