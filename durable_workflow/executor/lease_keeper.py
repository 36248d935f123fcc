"""While an attempt's code runs, its process keeps the lease alive.

Leases are what lets the repair pass retry the work of a worker that died: the
shorter they are, the sooner that happens. They used to be long (300 s) because
only the activity's own ``heartbeat()`` renewed them, so an activity that runs
longer than its lease without heartbeating was handed out again while it still
ran. Here a daemon thread of the worker process renews, every third of the lease,
the lease of each attempt (and of each workflow task paused on a local activity)
that this process is running, fenced by the claim's lease id and generation. A
process that dies stops renewing, so its leases run out within one lease; a
process that lives keeps them, however long the code takes.

What this does not catch is code that hangs in a live process: give such
activities a ``start_to_close_timeout`` (or a ``heartbeat_timeout`` and call
``heartbeat()``), which the engine enforces whatever the lease says.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Iterator, Sequence

from durable_workflow import clock
from durable_workflow.executor.handback import Held
from durable_workflow.logs import get_logger
from durable_workflow.store import connections, tasks

logger = get_logger("durable_workflow")


class _Keeper:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Held, float] = {}  # claim -> lease seconds
        self._thread: threading.Thread | None = None
        self._busy = threading.Event()  # set while something is held

    @contextlib.contextmanager
    def keeping(self, holds: Sequence[Held], *, lease_seconds: float) -> Iterator[None]:
        """Renew ``holds`` while the block runs."""
        self.hold(holds, lease_seconds=lease_seconds)
        try:
            yield
        finally:
            self.release(holds)

    def hold(self, holds: Sequence[Held], *, lease_seconds: float) -> None:
        """Renew ``holds`` from now until :meth:`release` (an async attempt outlives the
        call that starts it)."""
        with self._lock:
            first = not self._held
            for held in holds:
                self._held[held] = lease_seconds
            if self._thread is None or not self._thread.is_alive():  # once per process
                self._thread = threading.Thread(
                    target=self._run, name="durable-workflow-leases", daemon=True
                )
                self._thread.start()
        if first:
            self._busy.set()

    def release(self, holds: Sequence[Held]) -> None:
        with self._lock:
            for held in holds:
                self._held.pop(held, None)

    def held(self) -> list[Held]:
        with self._lock:
            return list(self._held)

    def _run(self) -> None:
        while True:
            self._busy.wait()  # idle until an attempt runs
            with self._lock:
                if not self._held:
                    self._busy.clear()
                    continue
                period = min(self._held.values()) / 3
            time.sleep(max(period, 0.05))
            try:
                self.renew_all()
            finally:
                connections.close_thread_connections()

    def renew_all(self) -> None:
        """Renew every lease held now (one short statement each)."""
        with self._lock:
            holds = list(self._held.items())
        now = clock.now()
        for held, seconds in holds:
            until = now + dt.timedelta(seconds=seconds)
            try:
                if not tasks.renew_lease(held.task_id, held.lease_id, held.generation, until=until):
                    with self._lock:
                        self._held.pop(held, None)  # lost: settled, or handed out again
            except Exception:  # the database is away: the next round tries again
                logger.warning("could not renew the lease of task %s", held.task_id, exc_info=True)
                connections.discard_broken()


keeper = _Keeper()
