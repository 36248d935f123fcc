"""Reading the SQL a test captured, whether the engine sent a statement as text or
as the ``EXECUTE`` of a prepared one (:mod:`durable_workflow.store.prepared`)."""

from __future__ import annotations

import re

_EXECUTE = re.compile(r"EXECUTE dw_([a-z]+)_(.*)_[0-9a-f]{16}\b")
_TABLE = re.compile(r'(?:FROM|INTO|UPDATE) "([^"]+)"')  # group(0) starts with the verb


def kinds(text: str) -> list[tuple[str, str]]:
    """``(VERB, table)`` for each statement of a query, its ``PREPARE``\\ s left out
    (``table`` is empty for a statement that names none, e.g. ``COMMIT``)."""
    out = []
    for part in text.split(";\n"):
        part = part.strip()
        if part.startswith("PREPARE "):
            continue
        found = _EXECUTE.match(part)
        if found:
            out.append((found.group(1).upper(), found.group(2)))
        else:
            table = _TABLE.search(part)
            verb = part.split(None, 1)[0].upper() if part else ""
            if verb == "WITH" and table:  # a data-modifying WITH counts as what it does
                verb = table.group(0).split()[0].upper()
            out.append((verb, table.group(1) if table else ""))
    return out
