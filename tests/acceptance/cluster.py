"""A private PostgreSQL cluster a test may stop, crash and restart (never the shared one).

``initdb`` and ``pg_ctl`` of the machine's PostgreSQL, on a free port of 5441-5449,
with trust authentication; as root, the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import os
import pathlib
import pwd
import shutil
import socket
import subprocess
import tempfile

PORTS = range(5441, 5450)


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port among 5441-5449 for a private PostgreSQL")


def binaries_present() -> bool:
    return bool(shutil.which("initdb") and shutil.which("pg_ctl"))


class Cluster:
    def __init__(self) -> None:
        self.port = free_port()
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="dw-private-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        self._started = False
        if self._as_postgres:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start on ``self.port``; on a first start, move to another free port if a
        concurrent run took this one meanwhile (restarts keep the port)."""
        for _ in PORTS:
            options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            try:
                self._run(
                    "pg_ctl",
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.log),
                    "-o",
                    options,
                    "-w",
                    "start",
                )
                self._started = True
                return
            except subprocess.CalledProcessError:
                if self._started:
                    raise
                self.port = free_port()
        raise RuntimeError("no free port among 5441-5449 for a private PostgreSQL")

    def crash(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies at once, nothing is flushed."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
