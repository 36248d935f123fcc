#!/usr/bin/env python
"""Reliability suite entry point: ``python reliability/run.py [--quick] [--scenario NAME ...]``.

See docs/reliability.md. Starts its own PostgreSQL and Redis; needs their binaries.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reliability.harness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
