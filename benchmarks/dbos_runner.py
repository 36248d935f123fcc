"""The DBOS baseline, run in its own process (DBOS starts threads and owns its engine).

Protocol: the parent writes one JSON request per line on stdin and reads one
JSON answer per line on the original stdout (everything else DBOS prints goes
to stderr). Requests: ``{"op": "steps", "count": 20}`` runs one workflow of
``count`` no-op steps and answers the wall-clock time of every step boundary;
``{"op": "quit"}`` ends the process.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything DBOS prints must not corrupt the protocol
    from dbos import DBOS

    DBOS(
        config={
            "name": "dw-bench",
            "system_database_url": sys.argv[1],
            "log_level": "WARNING",
        }
    )

    @DBOS.step()
    def noop(index: int) -> int:
        return index

    @DBOS.workflow()
    def steps(count: int) -> list[float]:
        stamps = [time.time()]
        for index in range(count):
            noop(index)
            stamps.append(time.time())
        return stamps

    DBOS.launch()
    proto.write(json.dumps({"ready": True, "version": _version()}) + "\n")
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request.get("op") == "quit":
                break
            started = time.time()
            stamps = steps(int(request["count"]))
            finished = time.time()
            proto.write(
                json.dumps({"started": started, "finished": finished, "stamps": stamps}) + "\n"
            )
    finally:
        DBOS.destroy()


def _version() -> str:
    from importlib.metadata import version

    return version("dbos")


if __name__ == "__main__":
    main()
