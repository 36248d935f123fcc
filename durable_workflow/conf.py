"""Typed settings, read from the single ``DURABLE_WORKFLOW`` dict in Django settings.

Every key is optional; ``docs/reference/settings.md`` documents each one.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from durable_workflow.exceptions import ConfigurationError


@dataclasses.dataclass(frozen=True)
class Settings:
    #: Dotted path to the project's Celery app; ``None`` uses Celery's current app.
    CELERY_APP: str | None = None
    #: Dotted path of the class that publishes task messages, built once by the app's
    #: ``ready()`` (``executor.dispatch``): Celery unless a project replaces it.
    DISPATCH_BACKEND: str = "durable_workflow.transport.celery.CeleryBackend"
    #: Extra named Celery apps for the ``connection`` routing attribute.
    CONNECTIONS: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Queue for workflow tasks and activities that name none (``None``: Celery's default).
    DEFAULT_QUEUE: str | None = None
    #: Named work queues with fleet-wide limits (``{"stripe": {"concurrency": 20}}``),
    #: held as ``QueueLimit`` values once read (``durable_workflow.queue_limits``).
    QUEUES: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Payload codec for new runs: ``"avro"`` (default) or ``"json"``.
    PAYLOAD_CODEC: str = "avro"
    #: How long an activity attempt owns its task before repair may hand it out again;
    #: the running process renews it every third of this (``lease_keeper``), so it
    #: bounds how long a crashed attempt waits, not how long an activity may run.
    ACTIVITY_LEASE_SECONDS: int = 30
    #: Lease a workflow task holds while it replays (it commits in one transaction), or
    #: while one of its local activities runs (renewed the same way).
    WORKFLOW_TASK_LEASE_SECONDS: int = 30
    #: A ready task whose message was sent this long ago and is still unclaimed is re-sent.
    REDISPATCH_AFTER_SECONDS: int = 3
    #: Upper bound of the exponential back-off between re-sends of one task.
    REDISPATCH_MAX_BACKOFF_SECONDS: int = 300
    #: A bulk action from the runs list over more runs than this becomes a bulk job:
    #: processed in batches by a Celery task, with a progress page (at most this many
    #: are done inside the request).
    BULK_INLINE_MAX_RUNS: int = 100
    #: Runs a bulk job acts on per batch (one transaction each).
    BULK_BATCH_SIZE: int = 100
    #: An open bulk job whose progress has not moved for this long is presumed lost
    #: (its worker died, or its task message was lost): the doctor reports it and the
    #: repair pass sends its message again.
    BULK_STALLED_AFTER_SECONDS: int = 300
    #: Tasks inspected per repair pass.
    REPAIR_SCAN_LIMIT: int = 500
    #: How often the Celery beat entry runs the repair pass.
    REPAIR_INTERVAL_SECONDS: float = 5.0
    #: ``--loop`` commands: first wait after a failed pass (doubled per failure) ...
    LOOP_BACKOFF_INITIAL_SECONDS: float = 1.0
    #: ... up to this long, until a pass succeeds again.
    LOOP_BACKOFF_MAX_SECONDS: float = 30.0
    #: Longest broker countdown used to wake a timer; the database row decides.
    TIMER_MAX_COUNTDOWN_SECONDS: int = 900
    #: Times a workflow task is retried when SQLite reports "database is locked".
    DATABASE_LOCKED_RETRIES: int = 10
    #: Exceptions (dotted paths, class names or type keys) that fail a run when its body
    #: raises them, besides activity and child failures and ``NonRetryableError``; any
    #: other exception fails the workflow task and parks the run for a fix and a repair.
    #: ``["Exception"]``: every exception fails the run, as the spec describes.
    FAILURE_EXCEPTION_TYPES: list[str] = dataclasses.field(default_factory=list)
    #: Attempts of a workflow task that may end without an outcome (an error, or its
    #: worker died) before it is parked with a failure row (0: delivered for ever).
    WORKFLOW_TASK_MAX_ATTEMPTS: int = 5
    #: Lease expiries (crashed or stuck attempts) an activity survives before it fails.
    ACTIVITY_MAX_LEASE_EXPIRIES: int = 5
    #: Identifier this process reports as lease owner (default: hostname:pid).
    WORKER_ID: str | None = None
    #: How long ``WorkflowStub.update()`` waits for the update to finish.
    UPDATE_WAIT_TIMEOUT_SECONDS: float = 10.0
    #: How often a waiting update caller polls its row.
    UPDATE_POLL_INTERVAL_MS: int = 50
    #: Run the workflow task an activity result (when the workflow and the activity
    #: share a queue) or a due timer wakes in the same worker, right away, instead of
    #: publishing it.
    EAGER_WORKFLOW_TASKS: bool = True
    #: Run a queued activity a workflow task schedules in the same worker, right away
    #: (when the activity shares the run's queue), instead of publishing it.
    EAGER_ACTIVITIES: bool = True
    #: A due timer whose run is warm in another live worker runs the woken workflow
    #: task in its own transaction anyway (a cold replay) when the run's history holds at
    #: most this many events, instead of sending it to that worker (0: always send it).
    TIMER_REPLAY_IN_PLACE_MAX_EVENTS: int = 50
    #: Follow-ups (eager workflow tasks and activities) one message may chain.
    EAGER_CHAIN_LIMIT: int = 100
    #: Fan-out members a worker takes at once after quick ones (under 10 ms each),
    #: run one after the other and settles in one transaction (1: one at a time).
    EAGER_SIBLING_BATCH: int = 8
    #: Async activities (``async def handle``) a worker process runs at once on its
    #: event loop; a Celery slot that finds the loop full waits for room (0: async
    #: activities run to the end in the Celery slot, like synchronous ones).
    ASYNC_ACTIVITY_CONCURRENCY: int = 100
    #: How often a worker process asks whether the runs of its async attempts were
    #: cancelled or closed, to cancel those coroutines.
    ASYNC_ACTIVITY_CHECK_SECONDS: float = 2.0
    #: PostgreSQL: send the engine's own statements as ``EXECUTE``\ s of statements
    #: prepared once per connection (off by itself behind ``DISABLE_SERVER_SIDE_CURSORS``).
    PREPARED_STATEMENTS: bool = True
    #: Register Celery worker processes (visible in the admin and the doctor).
    WORKER_REGISTRATION: bool = True
    #: Capabilities this worker offers (e.g. ``["gpu:nvidia-l4"]``).
    WORKER_CAPABILITIES: list[str] = dataclasses.field(default_factory=list)
    #: Worker sessions this worker may hold (0: none).
    MAX_CONCURRENT_WORKER_SESSIONS: int = 0
    #: First pause before an in-session activity task a worker refused (its session is
    #: held elsewhere, or no worker has room) is offered again; doubled per message ...
    WORKER_SESSION_REFUSAL_BACKOFF_SECONDS: float = 0.5
    #: ... up to this long.
    WORKER_SESSION_REFUSAL_MAX_BACKOFF_SECONDS: float = 30.0
    #: Seconds between worker registration heartbeats.
    WORKER_HEARTBEAT_SECONDS: float = 10.0
    #: A registration silent this long counts as gone.
    WORKER_STALE_AFTER_SECONDS: int = 30
    #: Tasks in a row failing on database or broker errors after which a worker process
    #: stops being a routing target (sticky owner, session holder) until one succeeds.
    WORKER_UNHEALTHY_AFTER_FAILURES: int = 3
    #: Due countdown messages (timers, delayed retries) a Celery worker starts per turn of
    #: its event loop, where kombu starts ten and then polls the broker for up to a second
    #: (``transport/worker_hub``). 0 or ``None``: kombu's own limit.
    WORKER_TIMERS_PER_TURN: int | None = 1000
    #: Compatibility marker stamped on the runs this process starts (``None``: none).
    COMPATIBILITY_CURRENT: str | None = None
    #: Markers this worker may execute (``[]``: just the current one; ``"*"``: any).
    COMPATIBILITY_SUPPORTED: list[str] = dataclasses.field(default_factory=list)
    #: Countdown on a message an incompatible worker hands back to the queue.
    COMPATIBILITY_HANDBACK_SECONDS: float = 1.0
    #: Keep suspended workflow bodies warm between workflow tasks of a run (per process).
    STICKY_ENABLED: bool = True
    #: Runs kept warm per worker process (least recently used are evicted).
    STICKY_CACHE_CAPACITY: int = 100
    #: A warm body unused for this long is replayed cold next time.
    STICKY_TTL_SECONDS: int = 300
    #: Cache alias whose lock keeps schedule ticks from overlapping (django-redis in production).
    SCHEDULE_LOCK_CACHE: str = "default"
    #: Lifetime of that lock (renewed every third of it while a tick runs): how long a
    #: ticker that died inside a tick keeps the others out.
    SCHEDULE_LOCK_TIMEOUT_SECONDS: int = 5
    #: Seconds between ticks for ``schedule_tick --loop`` and the Celery beat entry.
    SCHEDULE_TICK_INTERVAL_SECONDS: float = 10.0
    #: Namespace stamped on schedules (and, later, on runs) of this deployment.
    NAMESPACE: str = "default"
    #: ``should_continue_as_new()`` turns true at this many history events (0: never).
    CONTINUE_AS_NEW_EVENT_THRESHOLD: int = 10_000
    #: ... or at this many bytes of history payload (0: never).
    CONTINUE_AS_NEW_SIZE_THRESHOLD: int = 5 * 1024 * 1024
    #: Overrides for structural limits (0 disables a check); see ``limit()``.
    STRUCTURAL_LIMITS: dict[str, int] = dataclasses.field(default_factory=dict)

    # --- Metrics (docs/how-to/metrics.md) ---
    #: Record Prometheus counters and histograms in this process (needs the
    #: ``prometheus`` extra); the scrape view is ``durable_workflow.contrib.prometheus``.
    PROMETHEUS_METRICS: bool = False
    #: A scraper sending ``Authorization: Bearer <this>`` may read the scrape view
    #: (``None``: only users with the view permission, or a route of your own).
    PROMETHEUS_SCRAPE_TOKEN: str | None = None

    # --- Exception aliases (durable_workflow.exception_aliases; read at app start) ---
    #: Durable type keys of exception classes -> their dotted paths: a failure of such a
    #: class is recorded under the key, and replays as the class the key names now.
    EXCEPTION_TYPES: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Old dotted paths of exception classes that moved -> their dotted paths now.
    EXCEPTION_CLASS_ALIASES: dict[str, str] = dataclasses.field(default_factory=dict)

    # --- External payload storage (durable_workflow.payload_storage; read once at app start) ---
    #: Dotted path to a driver class or factory; ``None`` keeps every payload inline.
    PAYLOAD_STORAGE: str | None = None
    #: Keyword arguments for it, e.g. ``{"root": "/srv/dw-payloads"}`` or ``{"alias": "payloads"}``.
    PAYLOAD_STORAGE_OPTIONS: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Encoded payloads at or over this size are offloaded (0: none; references still resolve).
    PAYLOAD_OFFLOAD_THRESHOLD_BYTES: int = 256 * 1024
    #: Prefix of the content-addressed object keys: ``<prefix><sha256[:2]>/<sha256>``.
    PAYLOAD_STORAGE_PREFIX: str = "dw-payloads/"

    # --- Payload codec chain (durable_workflow.payload_codecs; read once at app start) ---
    #: Byte transforms applied after encoding, in order: "zlib", "zstd", "aes-gcm" or dotted
    #: paths of transform classes. Empty: payloads are stored as encoded.
    PAYLOAD_CODECS: list[str] = dataclasses.field(default_factory=list)
    #: Key id -> base64 AES key (16, 24 or 32 bytes), or the dotted path of a callable
    #: returning that dict. Retired keys stay here so old payloads still decode.
    PAYLOAD_ENCRYPTION_KEYS: dict[str, str] | str = dataclasses.field(default_factory=dict)
    #: The key id new payloads are encrypted with (optional when there is one key).
    PAYLOAD_ENCRYPTION_KEY_ID: str | None = None
    #: Permission an admin user needs to see decoded payloads (None: the page's view permission).
    PAYLOAD_DECODE_PERMISSION: str | None = None

    # --- Interceptors (durable_workflow.interceptors; read at app start) ---
    #: Interceptor classes (dotted paths or classes), instantiated once with no arguments;
    #: the first listed is the outermost.
    INTERCEPTORS: list[Any] = dataclasses.field(default_factory=list)

    # --- Determinism guardrails (docs/explanation/replay.md#guarded-calls) ---
    #: What a clock, randomness, environment or I/O call from workflow code does:
    #: ``"raise"`` (fails the workflow task), ``"warn"`` (logs it) or ``"allow"``.
    #: A workflow class overrides it with ``unsafe_calls``.
    UNSAFE_CALLS: str = "raise"
    #: What the boot-time scan of workflow sources does with its findings:
    #: ``"warn"`` (``manage.py check`` warnings), ``"throw"`` (errors) or ``"silent"``.
    GUARDRAILS_BOOT: str = "warn"

    def limit(self, kind: str) -> int:
        """The configured ceiling for a structural limit kind (an old name is accepted)."""
        kind = OLD_LIMIT_NAMES.get(kind, kind)
        return int(self.STRUCTURAL_LIMITS.get(kind, DEFAULT_LIMITS[kind]))

    def limit_warning_percent(self) -> int:
        """From this share of a count limit on, a warning is logged (0: never)."""
        return int(self.STRUCTURAL_LIMITS.get(WARNING_THRESHOLD, DEFAULT_WARNING_PERCENT))


#: Structural limits and their defaults; a value of 0 turns a check off.
DEFAULT_LIMITS = {
    "pending_activity_count": 2000,
    "pending_child_count": 1000,
    "pending_timer_count": 2000,
    "pending_signal_count": 5000,
    "pending_update_count": 500,
    "command_batch_size": 1000,
    "payload_size_bytes": 2 * 1024 * 1024,
    "memo_size_bytes": 256 * 1024,
    "search_attribute_size_bytes": 40 * 1024,
    "history_transaction_size": 5000,
}
#: Names the size limits had before they took the spec's wire names; still accepted in
#: ``STRUCTURAL_LIMITS`` and ``limit()``, and still found in histories written then.
OLD_LIMIT_NAMES = {
    "payload_size": "payload_size_bytes",
    "memo_size": "memo_size_bytes",
    "search_attribute_size": "search_attribute_size_bytes",
}
#: The ``STRUCTURAL_LIMITS`` key of the warning threshold (a percentage, 0 to 100).
WARNING_THRESHOLD = "warning_threshold_percent"
DEFAULT_WARNING_PERCENT = 80


_INT_KEYS = {f.name for f in dataclasses.fields(Settings) if f.type in ("int", "float")}


@functools.cache
def get_settings() -> Settings:
    raw: Any = getattr(django_settings, "DURABLE_WORKFLOW", {}) or {}
    if not isinstance(raw, dict):
        raise ConfigurationError("settings.DURABLE_WORKFLOW must be a dict")
    known = {f.name for f in dataclasses.fields(Settings)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigurationError(f"unknown DURABLE_WORKFLOW keys: {', '.join(unknown)}")
    for key in _INT_KEYS & set(raw):
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ConfigurationError(f"DURABLE_WORKFLOW[{key!r}] must be a number >= 0")
    if "STRUCTURAL_LIMITS" in raw:
        raw = {**raw, "STRUCTURAL_LIMITS": _structural_limits(raw["STRUCTURAL_LIMITS"])}
    if raw.get("PAYLOAD_CODEC", "avro") not in ("avro", "json"):
        raise ConfigurationError("DURABLE_WORKFLOW['PAYLOAD_CODEC'] must be 'avro' or 'json'")
    _check_compatibility(raw)
    if raw.get("GUARDRAILS_BOOT", "warn") not in ("warn", "throw", "silent"):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['GUARDRAILS_BOOT'] must be 'warn', 'throw' or 'silent'"
        )
    if raw.get("UNSAFE_CALLS", "raise") not in ("raise", "warn", "allow"):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['UNSAFE_CALLS'] must be 'raise', 'warn' or 'allow'"
        )
    _check_prometheus(raw)
    per_turn = raw.get("WORKER_TIMERS_PER_TURN")
    if per_turn is not None and (
        isinstance(per_turn, bool) or not isinstance(per_turn, int) or per_turn < 0
    ):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['WORKER_TIMERS_PER_TURN'] must be None or an integer >= 0"
        )
    _check_integer(raw, "TIMER_REPLAY_IN_PLACE_MAX_EVENTS")
    _check_dotted_path(raw, "DISPATCH_BACKEND")
    types = raw.get("FAILURE_EXCEPTION_TYPES", [])
    if not isinstance(types, list | tuple) or not all(isinstance(t, str) and t for t in types):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['FAILURE_EXCEPTION_TYPES'] must be a list of exception names "
            "(dotted paths, class names or type keys)"
        )
    if "QUEUES" in raw:
        from durable_workflow import queue_limits

        raw = {**raw, "QUEUES": queue_limits.parse(raw["QUEUES"])}
    return Settings(**raw)


def _structural_limits(limits: Any) -> dict[str, int]:
    """``STRUCTURAL_LIMITS`` checked, with old kind names under their wire names."""
    known = {*DEFAULT_LIMITS, *OLD_LIMIT_NAMES, WARNING_THRESHOLD}
    if not isinstance(limits, dict) or set(limits) - known:
        raise ConfigurationError(
            "DURABLE_WORKFLOW['STRUCTURAL_LIMITS'] keys must be among: "
            + ", ".join(sorted([*DEFAULT_LIMITS, WARNING_THRESHOLD]))
        )
    checked: dict[str, int] = {}
    for kind, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigurationError(
                f"DURABLE_WORKFLOW['STRUCTURAL_LIMITS'][{kind!r}] must be an integer >= 0"
            )
        if kind == WARNING_THRESHOLD and value > 100:
            raise ConfigurationError(
                f"DURABLE_WORKFLOW['STRUCTURAL_LIMITS'][{kind!r}] is a percentage (0 to 100)"
            )
        name = OLD_LIMIT_NAMES.get(str(kind), str(kind))
        if name in checked:
            raise ConfigurationError(
                f"DURABLE_WORKFLOW['STRUCTURAL_LIMITS'] sets {name!r} twice (once by its old name)"
            )
        checked[name] = value
    return checked


def _check_prometheus(raw: dict[str, Any]) -> None:
    enabled = raw.get("PROMETHEUS_METRICS", False)
    if not isinstance(enabled, bool):
        raise ConfigurationError("DURABLE_WORKFLOW['PROMETHEUS_METRICS'] must be True or False")
    token = raw.get("PROMETHEUS_SCRAPE_TOKEN")
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['PROMETHEUS_SCRAPE_TOKEN'] must be None or a string of "
            "at least 16 characters"
        )
    if enabled and importlib.util.find_spec("prometheus_client") is None:
        raise ConfigurationError(
            "DURABLE_WORKFLOW['PROMETHEUS_METRICS'] needs prometheus-client: "
            "pip install 'durable-workflow[prometheus]'"
        )


def _check_integer(raw: dict[str, Any], key: str) -> None:
    value = raw.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"DURABLE_WORKFLOW[{key!r}] must be an integer >= 0")


def _check_dotted_path(raw: dict[str, Any], key: str) -> None:
    if key not in raw:
        return
    value = raw[key]
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= 300
        or not all(part.isidentifier() for part in value.split("."))
        or "." not in value
    ):
        raise ConfigurationError(f"DURABLE_WORKFLOW[{key!r}] must be a dotted path to a class")


def _check_compatibility(raw: dict[str, Any]) -> None:
    def valid(marker: Any) -> bool:
        return isinstance(marker, str) and 0 < len(marker.strip()) <= 191

    current = raw.get("COMPATIBILITY_CURRENT")
    if current is not None and (not valid(current) or current.strip() == "*"):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['COMPATIBILITY_CURRENT'] must be None or a marker string "
            "of 1 to 191 characters other than '*'"
        )
    supported = raw.get("COMPATIBILITY_SUPPORTED", [])
    if not isinstance(supported, list | tuple) or not all(valid(m) for m in supported):
        raise ConfigurationError(
            "DURABLE_WORKFLOW['COMPATIBILITY_SUPPORTED'] must be a list of marker strings "
            "of 1 to 191 characters ('*': any marker)"
        )


@receiver(setting_changed)
def _reset(setting: str, **kwargs: Any) -> None:
    if setting == "DURABLE_WORKFLOW":
        get_settings.cache_clear()
        from durable_workflow.engine import guards

        raw = getattr(django_settings, "DURABLE_WORKFLOW", None) or {}
        policy = raw.get("UNSAFE_CALLS", "raise") if isinstance(raw, dict) else "raise"
        if policy in guards.POLICIES:  # a bad value is refused by get_settings()
            guards.set_default_policy(policy)
        from durable_workflow import interceptors

        entries = raw.get("INTERCEPTORS", []) if isinstance(raw, dict) else []
        interceptors.configure(interceptors.load(entries))
