"""The suite's process supervisor: Celery workers and the engine's loops, restarted when
they die, the way docs/how-to/operations.md says to run them (systemd ``Restart=always``,
``RestartSec=1``, ``KillMode=control-group``: what is left of a dead unit's process group
is killed before the replacement starts).

Every process runs in its own session and process group and is stopped by PID. Each start
is written to ``<run dir>/pids`` (pid and kernel start time), so ``reliability.cleanup``
can stop what a crashed harness left behind without killing a recycled PID.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from benchmarks.workers import Worker, WorkerSpec, children, launch_worker, spawn, stop_process
from reliability import config

RESTART_SECONDS = 1.0


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/<pid>/stat): with the pid,
    it names one process for good."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _marked(pid: int) -> bool:
    """The process carries this run's directory in its environment (it descends from
    the harness of this run)."""
    marker = f"{config.RUN_DIR_ENV}={os.environ.get(config.RUN_DIR_ENV, '')}".encode()
    try:
        return marker in pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def alive_and_ours(pid: int) -> bool:
    """``pid`` runs and belongs to this run."""
    return pathlib.Path(f"/proc/{pid}").exists() and _marked(pid)


def group_members(pgid: int) -> list[int]:
    """This run's processes in the session and process group ``pgid`` (both equal the
    leader's pid for what the supervisor starts)."""
    members = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and int(fields[3]) == pgid and _marked(int(entry.name)):
                members.append(int(entry.name))
    return members


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of a group whose leader may already be gone."""
    for pid in group_members(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@dataclasses.dataclass
class Exit:
    unit: str
    at: float
    returncode: int | None
    expected: bool  # the harness killed it on purpose


@dataclasses.dataclass
class Unit:
    """One supervised program: a Celery worker (``spec``) or a command (``command``)."""

    name: str
    spec: WorkerSpec | None = None
    command: list[str] | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    process: Any = None  # Worker, or subprocess.Popen for a command
    starts: int = 0
    expect_death: bool = False
    restart_at: float | None = None

    @property
    def popen(self) -> subprocess.Popen[bytes] | None:
        return self.process.process if isinstance(self.process, Worker) else self.process

    @property
    def pid(self) -> int | None:
        popen = self.popen
        return popen.pid if popen is not None else None

    def alive(self) -> bool:
        popen = self.popen
        return popen is not None and popen.poll() is None

    def pids(self) -> list[int]:
        """The main process and its children (a prefork pool)."""
        pid = self.pid
        return [pid, *children(pid)] if pid is not None and self.alive() else []


class Supervisor:
    def __init__(self, run_dir: pathlib.Path, log_dir: pathlib.Path) -> None:
        self.run_dir = run_dir
        self.log_dir = log_dir
        self.units: dict[str, Unit] = {}
        self.exits: list[Exit] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)

    # ------------------------------------------------------------------ units
    def add_worker(self, spec: WorkerSpec) -> Unit:
        return self._add(Unit(spec.name, spec=spec))

    def add_program(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Unit:
        """A program run with this interpreter (``python <argv>``), e.g. ``-m django ...``."""
        return self._add(Unit(name, command=[sys.executable, *argv], env=env or {}))

    def _add(self, unit: Unit) -> Unit:
        with self._lock:
            self.units[unit.name] = unit
            self._launch(unit)
        return unit

    def _launch(self, unit: Unit) -> None:
        if unit.spec is not None:
            unit.process = launch_worker(unit.spec, self.log_dir)
        else:
            assert unit.command is not None
            env = {**os.environ, **base_env(unit.name), **unit.env}
            unit.process = spawn(unit.command, log=self.log_dir / f"{unit.name}.log", env=env)
        unit.starts += 1
        unit.expect_death = False
        unit.restart_at = None
        pid = unit.pid
        with (self.run_dir / "pids").open("a") as handle:
            handle.write(f"{pid} {start_time(pid)} {unit.name}\n")

    def wait_ready(self, timeout: float = 90) -> None:
        """Every worker consumes."""
        for unit in list(self.units.values()):
            if isinstance(unit.process, Worker):
                unit.process.wait_ready(timeout)

    def workers(self) -> list[Unit]:
        return [u for u in self.units.values() if u.spec is not None]

    # ------------------------------------------------------------------ watching
    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        while not self._stopping.wait(0.2):
            with self._lock:
                for unit in self.units.values():
                    self._check(unit)

    def _check(self, unit: Unit) -> None:
        now = time.monotonic()
        if unit.restart_at is None:
            popen = unit.popen
            if popen is None or popen.poll() is None:
                return
            self.exits.append(Exit(unit.name, time.time(), popen.returncode, unit.expect_death))
            kill_group(popen.pid)  # KillMode=control-group: orphans go with their leader
            unit.restart_at = now + RESTART_SECONDS
        elif now >= unit.restart_at:
            self._launch(unit)

    # ------------------------------------------------------------------ faults
    def kill(self, unit: Unit, *, whole_group: bool = False) -> int | None:
        """SIGKILL the unit's main process (or its whole group); the supervisor restarts it."""
        with self._lock:
            pid = unit.pid
            if pid is None or not unit.alive():
                return None
            unit.expect_death = True
            with contextlib.suppress(ProcessLookupError):
                if whole_group:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
            return pid

    def kill_child(self, unit: Unit, rng: random.Random) -> int | None:
        """SIGKILL one pool process of a prefork worker (its parent replaces it)."""
        pool = unit.pids()[1:]
        if not pool:
            return None
        victim = rng.choice(pool)
        return victim if self.kill_pid(unit, victim) else None

    def kill_pid(self, unit: Unit, pid: int) -> bool:
        """SIGKILL one pool process ``pid`` of ``unit`` (checked to be one of its children)."""
        with self._lock:
            if pid not in unit.pids()[1:]:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return True

    def unexpected_exits(self) -> list[Exit]:
        return [e for e in self.exits if not e.expected]

    # ------------------------------------------------------------------ stopping
    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for unit in self.units.values():
                popen = unit.popen
                if popen is not None:
                    stop_process(popen, grace=10)
                    kill_group(popen.pid)


def base_env(role: str, **extra: str) -> dict[str, str]:
    """What every supervised process needs: the suite's settings, the run directory
    (ledger), and its role (the ``application_name`` of its database connections)."""
    return {
        "DJANGO_SETTINGS_MODULE": "reliability.settings",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(config.ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "DW_CHAOS_ROLE": role,
        **extra,
    }
