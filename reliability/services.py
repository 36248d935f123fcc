"""The suite's own PostgreSQL cluster and Redis server: started, crashed, restarted and
stopped by PID, in a scratch directory of the run (nothing shared is touched).

PostgreSQL refuses to run as root; when the suite runs as root, the cluster's commands
run as the ``postgres`` user (``runuser``), in a directory that user owns.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import pwd
import shutil
import signal
import subprocess
import time

from benchmarks.workers import spawn, stop_process
from reliability import config


def _run(command: list[str], *, timeout: float = 60) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


class Postgres:
    """A private cluster in ``<run dir>/pg`` on ``config.PG_PORT``."""

    def __init__(self, run_dir: pathlib.Path) -> None:
        self.home = run_dir / "pg"
        self.data = self.home / "data"
        self.log = self.home / "server.log"
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _ctl(self, *args: str, timeout: float = 60) -> str:
        return _run(
            [*self._as, str(config.PG_BIN / "pg_ctl"), "-D", str(self.data), *args], timeout=timeout
        )

    def init(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if self._as:
            uid, gid = pwd.getpwnam("postgres")[2:4]
            os.chown(self.home, uid, gid)
            os.chmod(self.home.parent, 0o711)  # the run directory: let postgres through
        _run(
            [
                *self._as,
                str(config.PG_BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                config.PG_USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        )

    def start(self) -> None:
        options = (
            f"-p {config.PG_PORT} -k {self.home} -c listen_addresses={config.PG_HOST} "
            "-c max_connections=200"
        )
        self._ctl("-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def crash(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies, recovery runs on the next start."""
        self._ctl("-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        """Stop the cluster whatever its state (fast shutdown, else SIGKILL of the postmaster)."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._ctl("-m", "fast", "-w", "-t", "20", "stop", timeout=30)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def running(self) -> bool:
        pid = self.postmaster_pid()
        return pid is not None and pathlib.Path(f"/proc/{pid}").exists()

    def version(self) -> str:
        return _run([str(config.PG_BIN / "postgres"), "--version"]).strip()


class Redis:
    """A private Redis (append-only file on, as a broker that must survive restarts is
    configured) in ``<run dir>/redis``, run as a child process of the harness."""

    def __init__(self, run_dir: pathlib.Path) -> None:
        self.home = run_dir / "redis"
        self.log = self.home / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        command = [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(config.REDIS_PORT),
            "--bind",
            config.REDIS_HOST,
            "--dir",
            str(self.home),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--daemonize",
            "no",
        ]
        self.process = spawn(command, log=self.log, env=dict(os.environ), cwd=self.home)
        deadline = time.monotonic() + 30
        while not self.ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(
            host=config.REDIS_HOST,
            port=config.REDIS_PORT,
            socket_timeout=5,
            socket_connect_timeout=2,
        )

    def ping(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:
            return False

    def kill(self) -> None:
        """A crash: SIGKILL (the append-only file keeps what was written up to a second ago)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def flush(self) -> None:
        """Every message lost at once (FLUSHALL), the server staying up."""
        self.client().flushall()

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, grace=5)

    def version(self) -> str:
        return str(self.client().info("server").get("redis_version"))


def create_database() -> None:
    import psycopg

    with psycopg.connect(config.pg_url("postgres"), autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{config.PG_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{config.PG_DB}"')


def admin():  # type: ignore[no-untyped-def]
    """A fresh autocommit connection to the engine's database, outside Django."""
    import psycopg

    return psycopg.connect(config.pg_url(), autocommit=True, connect_timeout=5)


def terminate_backends(role_prefix: str) -> int:
    """``pg_terminate_backend`` every connection whose application name starts with
    ``role_prefix``; the number terminated."""
    with admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name LIKE %s AND pid <> pg_backend_pid()",
            (config.PG_DB, role_prefix + "%"),
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)
