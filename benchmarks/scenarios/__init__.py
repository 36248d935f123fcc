"""One module per scenario of the issue; each exposes ``run(ctx) -> dict``."""

ORDER = [
    "sequential",
    "throughput",
    "local",
    "fanout",
    "async_io",
    "queue_limit",
    "replay",
    "dbwork",
    "long",
    "memory",
    "floor",
    "scaling",
    "aged",
    "prune",
    "timers",
]
