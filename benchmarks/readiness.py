"""Importing this module makes a Celery worker tell its starter that it consumes:
on ``worker_ready`` it writes its pid to ``$DW_BENCH_READY_FILE`` (the harness waits
for the file; see ``benchmarks.workers.start_worker``)."""

from __future__ import annotations

import os
import pathlib

from celery.signals import worker_ready


@worker_ready.connect
def _announce_ready(**_: object) -> None:
    path = os.environ.get("DW_BENCH_READY_FILE")
    if path:
        pathlib.Path(path).write_text(str(os.getpid()))
