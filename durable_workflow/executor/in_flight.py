"""May a ready task's message still be on its way? What the repair pass asks the broker
before it takes a message for lost (``repair.py``).

A message is on its way while it waits in its queue, maybe behind a backlog, or while
a worker has taken it and not acknowledged it yet: a countdown message (a timer, a
retry's back-off) is taken at once and kept until it is due and has run. The dispatch
backend says both when it can (``waiting`` and ``held``; ``transport/celery.py``).

A queue may never empty, so a waiting message counts only until it has been
deliverable for ``in_backlog`` seconds. A held message counts however late while the
registered workers vouch for it: some are live and healthy, none whose tasks keep
failing. A worker behind its due timers under load holds them past their due time,
and a second copy would only add to its work. A worker that died holding messages
keeps them from the queue until the broker gives them back (kombu's visibility
timeout, an hour by default), so held messages count not at all once a registered
worker that may have taken them has gone silent, and only ``in_backlog`` seconds when
no registration answers for them (workers that do not register, or fail).

A broker that can never name the held messages (AMQP: ``held`` answers ``None``)
holds none as far as the pass knows, so a timer its worker holds past due is re-sent
(a duplicate, skipped). A broker that can name them but whose read failed this pass
(a timeout, a reset) answers a guess instead (``held.UNREAD``, like ``held.EVERY``
for too many to read): every task's message may be held, and counts only for
``in_backlog`` seconds, whatever the registrations say, since no holder was seen.
Taking the failure for "none held" re-sent every held timer a few seconds past due
on each pass the read failed; skipping those messages altogether would leave a lost
one unsent for as long as the read keeps failing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Container

from durable_workflow.conf import get_settings
from durable_workflow.executor import dispatch
from durable_workflow.store import workers
from durable_workflow.store.records import TaskRecord


class InFlight:
    """The broker's answers for one repair pass: each queue counted, each connection's
    held messages and the registrations read at most once."""

    def __init__(self, *, now: dt.datetime, in_backlog: int) -> None:
        backend = dispatch.backend()
        self._now = now
        self._old = now - dt.timedelta(seconds=in_backlog)
        self._count = getattr(backend, "waiting", None)
        self._holding = getattr(backend, "held", None)
        self._depths: dict[tuple[str | None, str | None], int | None] = {}
        self._held: dict[str | None, Container[str] | None] = {}
        self._liveness: workers.Liveness | None = None

    def may_be(self, task: TaskRecord, *, sent_at: dt.datetime) -> bool:
        """Is ``task``'s message, sent at ``sent_at``, perhaps still on its way? ``False``
        also when the broker can never say; for ``in_backlog`` seconds when it guessed
        (held messages too many to read, or a read that failed). A countdown message
        is deliverable from its task's due time, any other from when it was sent."""
        recent = max(sent_at, task.available_at) > self._old
        routed = dispatch.routed(task)
        if recent and self._waiting(routed):
            return True
        held = self._held_by(routed)
        if held is None or str(task.id) not in held or self._holder_may_be_dead(sent_at):
            return False
        # ``exact``: the broker named the held messages rather than guessed (held.py:
        # too many to read, or the read failed).
        return recent or (getattr(held, "exact", True) and self._holders_answer_for_it())

    def _waiting(self, routed: TaskRecord) -> bool:
        key = (routed.connection, routed.queue)
        if key not in self._depths:
            self._depths[key] = self._count(routed) if self._count is not None else None
        return bool(self._depths[key])

    def _held_by(self, routed: TaskRecord) -> Container[str] | None:
        if routed.connection not in self._held:
            held = self._holding(routed) if self._holding is not None else None
            self._held[routed.connection] = held
        return self._held[routed.connection]

    def _holder_may_be_dead(self, sent_at: dt.datetime) -> bool:
        """Has a registered worker gone silent that was alive when the message was sent
        (and so may have taken it)? Its last heartbeat is then no older than one
        staleness period before the send."""
        beat = self._workers().last_silent_beat
        stale_after = get_settings().WORKER_STALE_AFTER_SECONDS
        return beat is not None and beat >= sent_at - dt.timedelta(seconds=stale_after)

    def _holders_answer_for_it(self) -> bool:
        """Do the registrations vouch for every worker that holds messages? Some are
        live and healthy and none keeps failing: a live holder runs its messages once it
        gets to them, however far behind it is (a stuck one's go back to the queue after
        the broker's visibility timeout)."""
        seen = self._workers()
        return seen.healthy > 0 and seen.failing == 0

    def _workers(self) -> workers.Liveness:
        if self._liveness is None:
            self._liveness = workers.liveness(
                now=self._now, stale_after=get_settings().WORKER_STALE_AFTER_SECONDS
            )
        return self._liveness
