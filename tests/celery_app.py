"""The Celery app used by acceptance tests (broker from DW_BROKER_URL, Redis by default).

Every broker key carries this test process's prefix (``tests.isolation``), so parallel
workers and parallel runs never take each other's messages.
"""

from __future__ import annotations

import os

from celery import Celery

from tests import isolation

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

app = Celery("durable_workflow_tests")
app.conf.update(
    broker_url=isolation.BROKER_URL,
    broker_transport_options={"global_keyprefix": isolation.key_prefix()},
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
if os.environ.get("DW_CELERY_DB_REUSE_MAX"):
    # What the deployment docs recommend: Celery's fixup then leaves connections open.
    app.conf.CELERY_DB_REUSE_MAX = int(os.environ["DW_CELERY_DB_REUSE_MAX"])
app.autodiscover_tasks(["durable_workflow"])

#: Routes that send the engine's tasks to queues of their own (Celery routing tests);
#: a worker started with DW_CELERY_ROUTES=1 publishes its follow-up tasks by them too.
ENGINE_ROUTES = {
    "durable_workflow.workflow_task": {"queue": "dw-workflows"},
    "durable_workflow.timer_task": "dw-workflows",
    "durable_workflow.activity_*": {"queue": "dw-activities"},
}
if os.environ.get("DW_CELERY_ROUTES") == "1":
    app.conf.task_routes = ENGINE_ROUTES


def use_routes(routes: object) -> None:
    """Route what this process publishes by ``routes`` from now on (a test fixture's
    change at run time). Celery builds ``app.amqp.router`` once, on the app's first
    publish, from the routes of that moment, and ``flush_routes()`` does not rebuild
    it: after any earlier publish in the process (another test's), ``send_task`` would
    keep the old routes (the routed-queues acceptance test's first workflow task then
    went to ``celery``, which its worker does not consume). So a new router too."""
    app.conf.task_routes = routes
    app.amqp.flush_routes()
    app.amqp.router = app.amqp.Router()


# The repair pass's beat entry, as the docs ask of every project (it runs only where
# beat does: the acceptance tests' workers started with -B).
from durable_workflow.transport.celery import beat_schedule  # noqa: E402

app.conf.beat_schedule = beat_schedule()

# A worker started with DW_OTEL_SPANS_PATH exports its OpenTelemetry spans there.
from tests.otel_spans import install_worker_exporter  # noqa: E402

install_worker_exporter()


# The due-timer step in a running worker (tests/acceptance/test_worker_hub.py). Remote
# control commands run inside the worker's event loop, so the probe sees its turns.
import time  # noqa: E402
from typing import Any  # noqa: E402

from celery.worker.control import inspect_command  # noqa: E402

_probe: dict[str, Any] = {}


@inspect_command()
def dw_hub_fire_timers(state: Any) -> dict[str, Any]:
    """The keywords bound to the hub's fire_timers ({}: kombu's method as it is)."""
    hub = state.consumer.hub
    if hub is None:
        return {"hub": None}
    return {"hub": type(hub).__name__, "keywords": dict(getattr(hub.fire_timers, "keywords", {}))}


@inspect_command()
def dw_hub_probe_turn(state: Any) -> dict[str, Any]:
    """Put 50 timer entries, due an hour ago, on the hub, and count how many the next turn
    of the running loop fires (an ``on_tick`` callback runs right after its timers)."""
    hub = state.consumer.hub
    fired: list[int] = []
    due = time.monotonic() - 3600
    for i in range(50):
        hub.call_at(due + i / 1000, fired.append, i)

    def after_turn() -> None:
        if fired:
            _probe["fired_in_one_turn"] = len(fired)
            hub.on_tick.discard(after_turn)

    _probe.clear()
    hub.on_tick.add(after_turn)
    return {"scheduled": 50}


@inspect_command()
def dw_hub_probe_result(state: Any) -> dict[str, Any]:
    return dict(_probe)
