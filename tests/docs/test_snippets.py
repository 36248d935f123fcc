"""Every Python and shell block of docs/ runs (issue 22): a broken snippet is a bug.

Each page runs in a subprocess of its own (``tests.docs.run_page``) on a copy of one
migrated SQLite database, so pages cannot see each other's workflows or rows.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.docs.blocks import DOCS, blocks, pages

ROOT = DOCS.parent
#: The quickstart has a test of its own (a new project, a real worker: test_quickstart.py).
PAGES = [page for page in pages() if blocks(page) and page.name != "quickstart.md"]


def _id(page: pathlib.Path) -> str:
    return str(page.relative_to(DOCS))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_python_blocks_compile(page):
    for block in blocks(page):
        if block.language != "python":
            continue
        code = block.code
        if block.mark == "fragment":  # an excerpt of a body may return or yield
            code = "def _fragment():\n" + "".join(f"    {line}\n" for line in code.splitlines())
        compile(code, block.where, "exec")


def test_every_mark_is_known_and_explained():
    for page in PAGES:
        for block in blocks(page):
            assert block.mark in (None, "fragment"), f"{block.where}: unknown mark {block.mark}"
            text = page.read_text().splitlines()[block.line - 2]
            if block.mark:
                assert "(" in text and ")" in text, f"{block.where}: say why it is a fragment"


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    path = tmp_path_factory.mktemp("docs") / "migrated.sqlite3"
    env = {**os.environ, "DW_TEST_DB": "sqlite", "DW_SQLITE_PATH": str(path)}
    env["PYTHONPATH"] = str(ROOT)
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        check=True,
        timeout=300,
    )
    return path


@pytest.mark.slow  # a Django process per page: make test-all (CI)
@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_page_runs(page, migrated, tmp_path):
    database = tmp_path / "db.sqlite3"
    shutil.copy(migrated, database)
    scratch = tmp_path / "project"
    scratch.mkdir()
    env = {
        **os.environ,
        "DW_TEST_DB": "sqlite",
        "DW_SQLITE_PATH": str(database),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.docs.run_page", str(page), str(scratch)],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-6000:]
