"""The benchmark harness stops what it started when interrupted (``benchmarks.workers``).

A stand-in for the harness takes the signals as ``benchmarks/harness.py`` does, spawns
a child the way it spawns its Celery workers (in a session of its own, out of reach of
the terminal's Ctrl-C) and stops it in a ``finally``. Each test waits for the child's
pid before signalling, then checks the stand-in ended and took its child with it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

STAND_IN = """
import os, pathlib, sys, time
from benchmarks import workers

workers.stop_on_signals()
child = workers.spawn(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    log=pathlib.Path(sys.argv[1]),
    env=dict(os.environ),
)
try:
    print(child.pid, flush=True)
    time.sleep(600)
except KeyboardInterrupt:
    sys.exit(130)
finally:
    workers.stop_processes([child])
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(tmp_path: pathlib.Path, *, sigint_ignored: bool) -> subprocess.Popen[str]:
    def inherit() -> None:
        # What a shell script's ``cmd &`` (no job control) hands its job.
        signal.signal(signal.SIGINT, signal.SIG_IGN if sigint_ignored else signal.SIG_DFL)

    return subprocess.Popen(
        [sys.executable, "-c", STAND_IN, str(tmp_path / "child.log")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DW_BENCH_RESULTS": str(tmp_path)},
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=inherit,
    )


@pytest.mark.parametrize(
    ("signum", "sigint_ignored"),
    [
        (signal.SIGINT, False),  # Ctrl-C in a terminal
        (signal.SIGINT, True),  # kill -INT of a harness started with ``&`` from a script
        (signal.SIGTERM, False),  # kill, timeout(1), a CI runner cancelling the job
    ],
    ids=["ctrl-c", "sigint-inherited-ignored", "sigterm"],
)
def test_an_interrupted_harness_stops_its_children(tmp_path, signum, sigint_ignored):
    harness = _start(tmp_path, sigint_ignored=sigint_ignored)
    child = None
    try:
        assert harness.stdout is not None
        child = int(harness.stdout.readline())
        assert _alive(child)
        harness.send_signal(signum)
        assert harness.wait(timeout=60) == 130
        assert not _alive(child), "the child outlived the harness"
    finally:
        harness.kill()
        harness.wait()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)
