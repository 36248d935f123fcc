#!/usr/bin/env bash
# Install what the benchmarks need into the project's .venv and run them.
# Usage: bash benchmarks/bench.sh [--quick] [--scenario NAME ...] [--repeat N] [...]
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
VENV="${VENV:-.venv}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
# Re-install only when the dependency lists changed since the last install
# (DW_BENCH_SKIP_INSTALL=1 skips it, e.g. to benchmark an exported snapshot
# of the tree with an existing virtualenv).
STAMP="$VENV/.bench-installed"
if [ -z "${DW_BENCH_SKIP_INSTALL:-}" ]; then
    if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ benchmarks/requirements.txt -nt "$STAMP" ]; then
        "$VENV/bin/python" -m pip install --quiet -e '.[test]' -r benchmarks/requirements.txt
        touch "$STAMP"
    fi
fi

exec "$VENV/bin/python" benchmarks/run.py "$@"
