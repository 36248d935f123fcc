"""Celery worker subprocesses for the benchmarks (and the reliability suite): started
in their own process group, always stopped (SIGTERM, then SIGKILL of the whole group),
also when the harness is interrupted (:func:`stop_on_signals`)."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from benchmarks import config

_LIVE: set[subprocess.Popen[bytes]] = set()


def _kill_all_at_exit() -> None:
    stop_processes(list(_LIVE), grace=2)


atexit.register(_kill_all_at_exit)

_stopping = False


def stop_on_signals() -> None:
    """Ctrl-C (SIGINT) and SIGTERM both raise ``KeyboardInterrupt`` in the main thread, so
    the ``finally`` blocks on the way out stop every process started here and drop or keep
    the databases as at a normal finish. Call it from the main thread before starting any.

    SIGINT is taken back even when it was inherited ignored (a shell script's ``cmd &``
    starts its job that way, and Python then raises nothing on ``kill -INT``); SIGTERM's
    default would end the process at once, leaving the workers (each in its own session)
    and the databases behind. A second signal while stopping is reported, not raised: it
    would cut the clean-up short.
    """
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, _frame: object) -> None:
    global _stopping
    name = signal.Signals(signum).name
    if _stopping:
        os.write(2, f"\n{name}: still stopping the workers and databases\n".encode())
        return
    _stopping = True
    os.write(2, f"\n{name}: stopping the workers and databases\n".encode())
    raise KeyboardInterrupt(name)


def stop_process(process: subprocess.Popen[bytes], *, grace: float = 15) -> None:
    """SIGTERM the process group of ``process``, then SIGKILL it after ``grace`` seconds."""
    try:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    except ProcessLookupError:
        pass
    finally:
        _LIVE.discard(process)


def stop_processes(processes: list[subprocess.Popen[bytes]], *, grace: float = 15) -> None:
    """:func:`stop_process` for several at once: every group is sent SIGTERM first, so
    their shutdowns overlap instead of adding up."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        stop_process(process, grace=max(0.0, deadline - time.monotonic()))


def spawn(
    command: list[str], *, log: pathlib.Path, env: dict[str, str], cwd: pathlib.Path = config.ROOT
) -> subprocess.Popen[bytes]:
    """Start ``command`` in a new session (its own process group), output appended to
    ``log``; it is stopped at interpreter exit if nobody stopped it before."""
    with log.open("ab") as handle:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    _LIVE.add(process)
    return process


def rss_kb(pid: int) -> int:
    """VmRSS of one process."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (prefork pool processes of a worker)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(p) for p in (task / "children").read_text().split()]
    return found


class Worker:
    def __init__(
        self,
        process: subprocess.Popen[bytes],
        log: pathlib.Path,
        name: str,
        ready_file: pathlib.Path | None = None,
    ) -> None:
        self.process = process
        self.log = log
        self.name = name
        self.ready_file = ready_file

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_kb(self) -> int:
        """VmRSS of the worker process (solo pool: the process that runs tasks)."""
        return rss_kb(self.pid)

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 15) -> None:
        stop_process(self.process, grace=grace)

    def ready(self) -> bool:
        """The worker consumes (its app wrote the ready file, see ``benchmarks.readiness``)."""
        return self.ready_file is not None and self.ready_file.exists()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"celery worker {self.name} did not start:\n{self.tail()}")
            time.sleep(0.05)


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """How to start one ``celery worker``; the defaults are the benchmarks' worker."""

    name: str
    app: str = "benchmarks.celery_app"
    settings: str = "benchmarks.settings"
    pool: str = "solo"
    concurrency: int | None = None
    queues: str = "celery"
    loglevel: str = dataclasses.field(
        default_factory=lambda: os.environ.get("DW_BENCH_WORKER_LOGLEVEL", "--loglevel=WARNING")
    )
    #: Celery's gossip, mingle and broker heartbeats: off for the benchmarks (less chatter).
    quiet: bool = True
    env: tuple[tuple[str, str], ...] = ()


def launch_worker(spec: WorkerSpec, log_dir: pathlib.Path) -> Worker:
    """Start a worker without waiting for it (see :meth:`Worker.wait_ready`)."""
    log = log_dir / f"worker-{spec.name}.log"
    ready = pathlib.Path(tempfile.mkdtemp(prefix="dw-worker-")) / "ready"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": spec.settings,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(config.ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
        "DW_BENCH_READY_FILE": str(ready),
        "DW_BENCH_WORKER_NAME": spec.name,
        "DW_BENCH_ADMIN": "0",  # the admin is the harness process's (settings.py)
        **dict(spec.env),
    }
    command = [sys.executable, "-m", "celery", "-A", spec.app, "worker", f"--pool={spec.pool}"]
    if spec.concurrency:
        command.append(f"--concurrency={spec.concurrency}")
    command += [spec.loglevel, "-Q", spec.queues, "-n", f"{spec.name}@%h"]
    if spec.quiet:
        command += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return Worker(spawn(command, log=log, env=env), log, spec.name, ready)


def start_worker(spec: WorkerSpec, log_dir: pathlib.Path, *, timeout: float = 60) -> Worker:
    """Start a worker and wait until it consumes."""
    worker = launch_worker(spec, log_dir)
    worker.wait_ready(timeout)
    return worker


@contextlib.contextmanager
def running_workers(
    count: int = 2,
    *,
    queues: str = "celery",
    env: tuple[tuple[str, str], ...] = (),
    prefix: str = "bench",
) -> Iterator[list[Worker]]:
    """``count`` solo-pool workers consuming ``queues`` (``env``: more environment),
    named ``<prefix><index>``; stopped on exit."""
    log_dir = config.RESULTS_DIR / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    workers: list[Worker] = []
    try:
        for index in range(count):
            spec = WorkerSpec(name=f"{prefix}{index}", queues=queues, env=env)
            workers.append(start_worker(spec, log_dir))
        yield workers
    finally:
        stop_processes([worker.process for worker in workers])


def check_alive(workers: list[Worker]) -> None:
    for worker in workers:
        if not worker.alive():
            raise RuntimeError(f"worker {worker.name} died:\n{worker.tail()}")
