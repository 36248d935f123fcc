"""Follow docs/quickstart.md word for word in a scratch directory, as a new user would.

    python -m tests.docs.quickstart SCRATCH_DIR [--install WHEEL_OR_CHECKOUT] [--broker URL]
        [--extras EXTRAS] [--settings PYTHON]

Every block of the page runs in order: shell lines in ``bash`` (``. .venv/bin/activate``
puts the virtualenv first on ``PATH``), the long-running ``celery ... worker`` line in
the background until it says ``ready.``, files written (``# path`` as the first line) or
appended (``# path (add at the end)``), other Python blocks through
``python manage.py shell``. A ``text`` block that follows a block is that block's
expected output: the real output must end with it.

Without ``--install`` the virtualenv lines are skipped and the current interpreter's
environment (the checkout's ``.venv``) is used. With it, ``DW_CHECKOUT`` is what is
installed (a wheel path or a checkout), with the page's extras or ``--extras`` instead
(``scripts/install_check.py`` tries each documented one).

Only isolation is added to what the page says, after its settings: the broker URL
(``--broker``), a Redis key prefix or a queue of this run's own, and a node name, so
that parallel runs on one machine never take each other's messages; ``--settings``
appends more (the install check's PostgreSQL database).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid

from tests.docs.blocks import DOCS

PAGE = DOCS / "quickstart.md"
_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_FILE = re.compile(r"^#\s*([\w./-]+\.py)(\s*\(add at the end\))?\s*$")


@dataclasses.dataclass(frozen=True)
class Step:
    line: int
    language: str
    code: str
    expected: str | None  # the text block that follows it, if any


def steps(page: pathlib.Path = PAGE) -> list[Step]:
    """The page's runnable blocks, each with the text block that follows it."""
    lines, found, index = page.read_text().splitlines(), [], 0
    fenced: list[tuple[int, str, str]] = []
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while lines[end].strip() != "```":
            end += 1
        fenced.append((index + 1, opening.group(1), "\n".join(lines[index + 1 : end]) + "\n"))
        index = end + 1
    for position, (line, language, code) in enumerate(fenced):
        if language in ("bash", "python"):
            after = fenced[position + 1] if position + 1 < len(fenced) else None
            expected = after[2] if after and after[1] == "text" else None
            found.append(Step(line, language, code, expected))
    return found


class Quickstart:
    def __init__(
        self,
        scratch: pathlib.Path,
        install: str | None,
        broker: str,
        *,
        extras: str | None = None,
        settings: str = "",
    ) -> None:
        self.scratch = scratch
        self.install = install
        self.broker = broker
        self.extras = extras
        self.settings = settings
        self.token = f"dw-quickstart-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "DW_CHECKOUT": install or ""}
        for name in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH", "VIRTUAL_ENV"):
            self.env.pop(name, None)
        if install is None:  # the current interpreter's environment plays the virtualenv
            self.env["PATH"] = f"{pathlib.Path(sys.executable).parent}:{self.env['PATH']}"
        self.workers: list[subprocess.Popen[bytes]] = []

    def run(self) -> None:
        try:
            for step in steps():
                output = self.step(step)
                if step.expected is not None:
                    actual = _normal(output)
                    wanted = _normal(step.expected)
                    if not actual.endswith(wanted):
                        raise AssertionError(
                            f"quickstart.md:{step.line}: the page shows\n{wanted}\n"
                            f"but the output was\n{actual}"
                        )
        finally:
            for worker in self.workers:
                os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)

    def step(self, step: Step) -> str:
        if step.language == "python":
            return self.python(step)
        return "".join(self.shell(command, step) for command in _commands(step.code))

    def python(self, step: Step) -> str:
        first = step.code.split("\n", 1)[0]
        named = _FILE.match(first)
        if named is None:
            return self.command(["python", "manage.py", "shell"], step, stdin=step.code)
        target = self.scratch / named.group(1)
        if named.group(2):  # add at the end
            target.write_text(target.read_text() + "\n" + step.code)
            if target.name == "settings.py":
                target.write_text(target.read_text() + self.isolation())
        else:
            target.write_text(step.code)
        return ""

    def isolation(self) -> str:
        """Settings only this harness adds: this run's broker, keys and queue."""
        return (
            "\n# Added by tests/docs/quickstart.py: this run's own broker keys and queue.\n"
            f"CELERY_BROKER_URL = {self.broker!r}\n"
            f"CELERY_BROKER_TRANSPORT_OPTIONS = {{'global_keyprefix': {self.token + ':'!r}}}\n"
            f"CELERY_TASK_DEFAULT_QUEUE = {self.token!r}\n"
            f"{self.settings}\n"
        )

    def shell(self, command: str, step: Step) -> str:
        words = shlex.split(command)
        if words[:3] == ["python3", "-m", "venv"] or words[:1] == ["pip"]:
            if self.install is None:
                return ""
            if words[0] == "python3":  # the interpreter this check runs with
                words[0] = sys.executable
            if self.extras is not None:
                wanted = f"[{self.extras}]" if self.extras else ""
                words = [re.sub(r"\[[\w,]+\]$", wanted, word) for word in words]
        if words == [".", ".venv/bin/activate"]:
            if self.install is not None:
                venv = self.scratch / ".venv"
                self.env["PATH"] = f"{venv / 'bin'}:{self.env['PATH']}"
                self.env["VIRTUAL_ENV"] = str(venv)
            return ""
        if words[:1] == ["celery"] and "worker" in words:
            return self.worker([*words, "-n", f"{self.token}@%h"], step)
        return self.command(words, step)

    def command(self, words: list[str], step: Step, stdin: str | None = None) -> str:
        done = subprocess.run(
            " ".join(shlex.quote(w) if "$" not in w else f'"{w}"' for w in words),
            shell=True,
            executable="/bin/bash",
            cwd=self.scratch,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"quickstart.md:{step.line}: `{' '.join(words)}` failed ({done.returncode})\n"
                f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        return done.stdout + done.stderr

    def worker(self, words: list[str], step: Step) -> str:
        log = self.scratch / f"worker-{len(self.workers)}.log"
        with log.open("wb") as handle:
            process = subprocess.Popen(
                words,
                cwd=self.scratch,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.workers.append(process)
        deadline = time.monotonic() + 120  # a failure timeout, not a speed assertion
        while "ready." not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"quickstart.md:{step.line}: the worker did not start\n"
                    f"{log.read_text(errors='replace')[-6000:]}"
                )
            time.sleep(0.2)
        return ""

    def worker_log(self) -> str:
        return "".join(
            path.read_text(errors="replace") for path in sorted(self.scratch.glob("worker-*.log"))
        )


def _commands(code: str) -> list[str]:
    joined = code.replace("\\\n", " ")
    lines = (line.split(" #", 1)[0].strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("scratch", type=pathlib.Path)
    parser.add_argument("--install", default=None)
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--extras", default=None, help="instead of the page's ([] for none)")
    parser.add_argument("--settings", default="", help="Python appended to the settings")
    options = parser.parse_args(argv)
    options.scratch.mkdir(parents=True, exist_ok=True)
    quickstart = Quickstart(
        options.scratch.resolve(),
        options.install,
        options.broker,
        extras=options.extras,
        settings=options.settings,
    )
    try:
        quickstart.run()
    except AssertionError as exc:
        print(f"{exc}\nworker log:\n{quickstart.worker_log()[-6000:]}", file=sys.stderr)
        return 1
    print(f"quickstart.md ran from top to bottom in {options.scratch}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
