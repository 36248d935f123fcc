"""The code blocks of the documentation pages, as the docs tests read them.

A fenced block of ``python``, ``bash`` or ``sh`` is run by ``tests/docs``; an HTML
comment on the line just above its fence (invisible on the site) marks the few that
are not run, and says why::

    <!-- docs-test: fragment (a workflow body: runs inside handle()) -->

``fragment`` blocks are only compiled (Python) or not run at all (shell). The first
line of a Python block may name the file it shows (``# proj/celery.py``, or
``# proj/settings.py (add at the end)``): the page's run writes (or appends) it there
instead of running it, and later blocks import it.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
RUN = {"python", "bash", "sh"}
_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*docs-test:\s*([\w-]+)\s*(?:\((.*)\))?\s*-->\s*$")
_FILE = re.compile(r"^#\s*([\w./-]+\.py)(\s*\(add at the end\))?\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    page: pathlib.Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    mark: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(DOCS.parent)}:{self.line}"

    @property
    def file(self) -> str | None:
        """The project file a Python block shows (its first line ``# path.py``), if any."""
        first = self.code.split("\n", 1)[0]
        match = _FILE.match(first) if self.language == "python" else None
        return match.group(1) if match else None

    @property
    def appends(self) -> bool:
        """Whether the file's block goes at the end of the file rather than replace it."""
        match = _FILE.match(self.code.split("\n", 1)[0])
        return bool(match and match.group(2))


def pages() -> list[pathlib.Path]:
    return sorted(DOCS.rglob("*.md"))


def blocks(page: pathlib.Path) -> list[Block]:
    """The page's blocks of a language the docs tests run, in order."""
    lines = page.read_text().splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        language = opening.group(1)
        mark = _MARK.match(lines[index - 1]) if index else None
        if language in RUN:
            code = "\n".join(lines[index + 1 : end]) + "\n"
            found.append(Block(page, index + 1, language, code, mark.group(1) if mark else None))
        index = end + 1
    return found
