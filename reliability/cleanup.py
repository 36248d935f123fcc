"""Stop whatever a run left behind: ``python -m reliability.cleanup RUN_DIR``.

``chaos.sh`` runs this from its EXIT trap, so a harness that crashed or was killed still
leaves nothing running. Only processes named in ``RUN_DIR/pids`` whose kernel start time
still matches are killed (a recycled PID is left alone), then the private PostgreSQL
cluster is stopped by its postmaster PID, and the run directory removed (unless the run
was asked to keep it).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import sys

from reliability import config
from reliability.processes import kill_group, start_time
from reliability.services import Postgres


def cleanup(run_dir: pathlib.Path, *, remove: bool = True) -> list[str]:
    os.environ[config.RUN_DIR_ENV] = str(run_dir)  # marks the processes of this run
    stopped = []
    pids = run_dir / "pids"
    if pids.exists():
        for line in pids.read_text().splitlines():
            pid_text, started, name = [*line.split(" ", 2), "", ""][:3]
            pid = int(pid_text)
            if start_time(pid) == started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                stopped.append(f"{name} ({pid})")
            kill_group(pid)
    postgres = Postgres(run_dir)
    if postgres.running():
        postgres.stop()
        stopped.append("postgresql")
    if remove and not (run_dir / "keep").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
    return stopped


if __name__ == "__main__":
    left = cleanup(pathlib.Path(sys.argv[1]))
    if left:
        print(f"reliability/cleanup: stopped {', '.join(left)}", file=sys.stderr)
