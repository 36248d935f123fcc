"""A private PgBouncer in front of the shared PostgreSQL (transaction or session mode)."""

from __future__ import annotations

import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile
import time

from tests.acceptance.cluster import free_port


def present() -> bool:
    return bool(shutil.which("pgbouncer") or os.path.exists("/usr/sbin/pgbouncer"))


class PgBouncer:
    def __init__(self, *, mode: str = "transaction", pool_size: int = 2) -> None:
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="dw-pgbouncer-"))
        (self.root / "users.txt").write_text('"postgres" ""\n')
        for _ in range(5):  # a concurrent run may take the free port first: try another
            self.port = free_port()
            if self._start(mode, pool_size):
                return
        raise RuntimeError("pgbouncer did not start")

    def _start(self, mode: str, pool_size: int) -> bool:
        (self.root / "pgbouncer.ini").write_text(
            "[databases]\n"
            "* = host=127.0.0.1 port=5432\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.root / 'users.txt'}\n"
            f"pool_mode = {mode}\n"
            f"default_pool_size = {pool_size}\n"
            "max_client_conn = 200\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.root / 'pgbouncer.log'}\n"
            f"pidfile = {self.root / 'pgbouncer.pid'}\n"
        )
        command = [shutil.which("pgbouncer") or "/usr/sbin/pgbouncer", "-d"]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            account = pwd.getpwnam("postgres")
            for path in (self.root, *self.root.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
            command += ["-u", "postgres"]
        done = subprocess.run([*command, str(self.root / "pgbouncer.ini")], timeout=30)
        if done.returncode != 0:
            return False
        deadline = time.monotonic() + 10
        while not (self.root / "pgbouncer.pid").exists():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        pidfile = self.root / "pgbouncer.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 15)
            deadline = time.monotonic() + 10
            while pidfile.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)
