#!/usr/bin/env bash
# Install what the reliability suite needs into the project's .venv and run it.
# Usage: bash reliability/chaos.sh [--quick] [--scenario NAME ...] [--seed N] [--skew S]
# Whatever happens (a crash, Ctrl-C, a CI timeout's SIGTERM), the EXIT trap stops every
# process the run started, by the PIDs it wrote down (reliability/cleanup.py).
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
VENV="${VENV:-.venv}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
# Same stamp as `make venv`: re-install only when pyproject.toml changed. DW_CHAOS_SKIP_INSTALL=1
# skips it (to measure an exported snapshot of a commit with an existing virtualenv).
STAMP="$VENV/.installed"
if [ -z "${DW_CHAOS_SKIP_INSTALL:-}" ] && { [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; }; then
    "$VENV/bin/python" -m pip install --quiet -e '.[test]'
    touch "$STAMP"
fi

# The harness makes its run directory under this parent; the trap cleans whatever is in it.
parent=$(mktemp -d /tmp/dw-chaos-run.XXXXXX)
chmod 711 "$parent"  # the cluster runs as the postgres user when the suite runs as root
export TMPDIR="$parent"
cleanup() {
    status=$?
    trap - EXIT INT TERM
    kept=""
    for run_dir in "$parent"/dw-chaos-*; do
        [ -d "$run_dir" ] || continue
        "$VENV/bin/python" -m reliability.cleanup "$run_dir" || true
        [ -e "$run_dir/keep" ] && kept="$run_dir"
    done
    if [ -n "$kept" ]; then
        echo "reliability: kept $kept" >&2
    else
        rm -rf "$parent"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Not exec: the trap must outlive the harness. The harness runs in the foreground, so a
# SIGTERM to this script is forwarded to it first.
"$VENV/bin/python" reliability/run.py "$@" &
harness=$!
trap 'kill -TERM "$harness" 2>/dev/null; wait "$harness"; exit 143' TERM
trap 'kill -INT "$harness" 2>/dev/null; wait "$harness"; exit 130' INT
wait "$harness"
