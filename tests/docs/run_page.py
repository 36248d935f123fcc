"""Run one documentation page's blocks in order, as a reader would, in a scratch project.

    python -m tests.docs.run_page docs/how-to/signals.md SCRATCH_DIR

Django is set up with ``tests.settings`` on the SQLite database ``DW_SQLITE_PATH``
(already migrated); a thread plays the worker, running whatever the page's code makes
ready. Python blocks share one namespace; a block that shows a file (``# shop/x.py``)
is written under SCRATCH_DIR, which is on ``sys.path``. ``python manage.py ...`` lines
run the command in this process; ``python -m pytest ...`` lines run the tests the
page wrote, in a process of their own. Exits non-zero at the first block that fails, naming it.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys
import threading
import traceback
import types

from tests.docs.blocks import Block, blocks


def main(page: pathlib.Path, scratch: pathlib.Path) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    sys.path.insert(0, str(scratch))
    import django

    django.setup()
    stop = _worker()
    # The page's module is registered like an imported one: dataclasses and the data
    # converter look classes up through sys.modules by their __module__.
    module = types.ModuleType("__docs__")
    sys.modules[module.__name__] = module
    namespace: dict[str, object] = module.__dict__
    try:
        for block in blocks(page):
            if block.mark == "fragment":
                continue
            try:
                _run(block, namespace, scratch)
            except BaseException:
                print(f"{block.where}: this block failed\n{block.code}", file=sys.stderr)
                traceback.print_exc()
                return 1
    finally:
        stop()
    return 0


def _run(block: Block, namespace: dict[str, object], scratch: pathlib.Path) -> None:
    if block.language != "python":
        for command in _commands(block.code):
            _shell(command, block)
        return
    if block.file:
        target = scratch / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        for package in target.relative_to(scratch).parents:
            init = scratch / package / "__init__.py"
            if package != pathlib.Path(".") and not init.exists():
                init.write_text("")
        before = target.read_text() if block.appends and target.exists() else ""
        target.write_text(before + block.code)
        return
    exec(compile(block.code, block.where, "exec"), namespace)


def _commands(code: str) -> list[str]:
    """The commands of a shell block: comments dropped, continued lines joined."""
    joined = code.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def _shell(command: str, block: Block) -> None:
    from django.core.management import call_command

    words = shlex.split(command)
    if words[:3] == ["python", "-m", "pytest"]:
        _pytest(words[3:], block)
        return
    if words[:2] != ["python", "manage.py"]:
        raise AssertionError(
            f"{block.where}: only `python manage.py ...` and `python -m pytest ...` lines "
            f"run here; mark the block "
            f"<!-- docs-test: fragment (why) --> or make it one: {command!r}"
        )
    call_command(*words[2:])


def _pytest(arguments: list[str], block: Block) -> None:
    """The page's tests, run by pytest in a process of their own in the scratch project
    (which the page's file blocks wrote), on a test database of their own."""
    scratch = pathlib.Path.cwd()
    path = [str(scratch), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *arguments],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if done.returncode != 0:
        output = done.stdout[-4000:] + done.stderr[-2000:]
        raise AssertionError(f"{block.where}: pytest failed\n{output}")


def _worker() -> object:
    """A thread that runs every ready task, as a worker would; returns its stop.

    It stands aside while a page's block is in the testing kit's fake mode.
    """
    from django.db import connection

    from durable_workflow.executor import dispatch
    from durable_workflow.testing import fake
    from durable_workflow.testing.inline import InlineBackend, run_ready_tasks

    dispatch.set_backend(InlineBackend())
    done = threading.Event()

    def loop() -> None:
        try:
            while not done.wait(0.02):
                if fake.active() is None:  # a page's fake mode runs its own tasks
                    run_ready_tasks()
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def stop() -> None:
        done.set()
        thread.join(timeout=30)

    return stop


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
