"""The import-layering contracts of pyproject.toml hold (the replay engine stays pure)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    # lint-imports reads [tool.importlinter] from pyproject.toml: the engine imports no
    # Django, Celery, store or executor module (directly or through another module), the
    # store no executor module, the executor none of the admin, webhooks, operations or
    # testing kit, and the modules of each package import each other without cycles
    # (but for the few the contract lists, each with its reason).
    lint_imports = pathlib.Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
