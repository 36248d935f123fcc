"""Print the N slowest tests of one or more JUnit XML reports (``scripts/test`` uses it).

    python scripts/slowest.py N REPORT.xml...

Each test is shown with its time (pytest's junit time: setup, call and teardown) and
the report it came from, slowest first.
"""

from __future__ import annotations

import pathlib
import sys
import xml.etree.ElementTree as ET


def timings(report: pathlib.Path) -> list[tuple[float, str]]:
    """(seconds, "suite: test id") for every test case in ``report``."""
    suite = report.stem.removeprefix("junit-")
    rows = []
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        rows.append((float(case.get("time") or 0), f"{suite}: {name}"))
    return rows


def main(argv: list[str]) -> int:
    count, reports = int(argv[0]), [pathlib.Path(arg) for arg in argv[1:]]
    rows = [row for report in reports if report.exists() for row in timings(report)]
    for seconds, name in sorted(rows, reverse=True)[:count]:
        print(f"{seconds:8.2f}s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
