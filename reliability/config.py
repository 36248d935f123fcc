"""Where the suite's private services live. Every value can be overridden by environment.

The suite starts its own PostgreSQL cluster and Redis server on these ports, so it may
crash them without touching anything else on the machine.
"""

from __future__ import annotations

import os
import pathlib
import socket

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS_DIR = pathlib.Path(os.environ.get("DW_CHAOS_RESULTS", ROOT / "reliability" / "results"))


def _port(variable: str, candidates: range) -> int:
    """The port named in the environment (a harness passes its choice on to the processes
    it starts), else the first free one of ``candidates``."""
    if os.environ.get(variable):
        return int(os.environ[variable])
    for port in candidates:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                os.environ[variable] = str(port)
                return port
    raise SystemExit(f"reliability: no free port in {candidates.start}-{candidates.stop - 1}")


PG_BIN = pathlib.Path(os.environ.get("DW_CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_HOST = "127.0.0.1"
PG_PORT = _port("DW_CHAOS_PG_PORT", range(5461, 5470))
PG_USER = "postgres"
PG_DB = "dw_chaos"

REDIS_HOST = "127.0.0.1"
REDIS_PORT = _port("DW_CHAOS_REDIS_PORT", range(6397, 6400))
BROKER_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/0"
CACHE_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/1"

#: The run's scratch directory (cluster, sockets, ledgers, pid list); set by the harness
#: for its child processes.
RUN_DIR_ENV = "DW_CHAOS_RUN_DIR"


def pg_url(database: str = PG_DB) -> str:
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"
