#!/usr/bin/env python
"""Benchmark entry point: ``python benchmarks/run.py [--quick] [--scenario NAME ...] [--repeat N]``.

See benchmarks/README.md. Needs PostgreSQL and Redis (defaults: 127.0.0.1).
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
