"""The boot-time scan: read registered workflows' sources for calls that break replay.

The runtime guards (``durable_workflow.unsafe_calls``) stop such a call when a
body makes it; the scan finds it before any body runs, in code paths a test may
never take, and also what the guards cannot see: ``datetime.now()`` and its
siblings, and writes to module-level state (a cache or counter kept in a
module global survives from one replay to the next, and differs between
workers).

``scan(cls)`` parses the source of a workflow class (its own methods and those
of its bases outside this package) and returns ``Finding`` s with file and line.
Names are resolved through the module's imports, so ``import time as t`` then
``t.time()``, or ``from random import choice`` then ``choice(...)``, are found.
What a ``dw.side_effect(...)`` call is given is not reported: it is recorded.
``manage.py check`` reports the findings (``GUARDRAILS_BOOT``), and so does the
doctor.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
from collections.abc import Iterator

from durable_workflow.exceptions import NonDeterministicCallError

#: Calls found by the scan, by their full name (the runtime guards' list, plus the
#: C methods they cannot wrap).
CALLS = frozenset(
    {
        *(f"time.{n}" for n in ("time", "time_ns", "monotonic", "monotonic_ns", "sleep")),
        *(f"time.{n}" for n in ("perf_counter", "perf_counter_ns")),
        *(f"datetime.datetime.{n}" for n in ("now", "utcnow", "today")),
        "datetime.date.today",
        *(
            f"random.{n}"
            for n in (
                "random",
                "randint",
                "randrange",
                "choice",
                "choices",
                "shuffle",
                "sample",
                "uniform",
                "gauss",
                "getrandbits",
                "randbytes",
                "seed",
            )
        ),
        "uuid.uuid1",
        "uuid.uuid4",
        "os.urandom",
        "os.getpid",
        "os.getenv",
        "os.system",
        *(f"secrets.{n}" for n in ("token_bytes", "token_hex", "token_urlsafe", "choice")),
        *(f"secrets.{n}" for n in ("randbelow", "randbits")),
        "subprocess.run",
        "subprocess.Popen",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "socket.socket",
        "socket.create_connection",
        "urllib.request.urlopen",
        "requests.get",
        "requests.post",
        "threading.Thread",
        "django.core.cache.cache.get",
        "django.core.cache.cache.set",
    }
)
#: Reads that are not calls.
ATTRIBUTES = frozenset({"os.environ"})
#: Methods that change a list, dict or set in place.
MUTATORS = frozenset(
    {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "add"}
)
_OWN_PACKAGE = __name__.split(".")[0]


@dataclasses.dataclass(frozen=True)
class Finding:
    workflow_type: str
    filename: str
    lineno: int
    what: str  # the call, ``os.environ``, or ``module state NAME``
    advice: str

    def __str__(self) -> str:
        return (
            f"{self.filename}:{self.lineno}: {self.workflow_type} uses {self.what}; {self.advice}"
        )


def scan(cls: type) -> list[Finding]:
    """What ``cls`` (and its bases outside this package) do that breaks replay."""
    key = str(getattr(cls, "type_key", None) or cls.__qualname__)
    found: list[Finding] = []
    for klass in cls.__mro__:
        module = getattr(klass, "__module__", "")
        if module.split(".")[0] == _OWN_PACKAGE or module == "builtins":
            continue
        if klass is not cls and not isinstance(klass, type):
            continue
        if getattr(klass, "unsafe_calls", None) == "allow" and klass is cls:
            return []
        found += _scan_class(klass, key)
    return sorted(set(found), key=lambda f: (f.filename, f.lineno, f.what))


def _scan_class(klass: type, key: str) -> list[Finding]:
    try:
        filename = inspect.getsourcefile(klass)
    except TypeError:
        filename = None
    node = _class_nodes(filename).get(klass.__qualname__)
    if filename is None or node is None:
        return []  # defined in a shell or generated: nothing to read
    visitor = _Visitor(_imported_names(filename), _module_state(filename))
    visitor.visit(node)
    return [Finding(key, filename, line, what, advice) for line, what, advice in visitor.found]


@functools.cache
def _module_tree(path: str | None) -> ast.Module | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as source:
            return ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return None


@functools.cache
def _class_nodes(path: str | None) -> dict[str, ast.ClassDef]:
    """Qualified name -> the first class statement of that name in the module.

    One parse per module, where ``inspect.getsource`` re-reads and re-parses the
    module for every class (seconds for a module that defines hundreds).
    """
    found: dict[str, ast.ClassDef] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(prefix + node.name, node)
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(node.body, f"{prefix}{node.name}.<locals>.")
            else:  # if/for/while/with/try blocks keep the enclosing prefix
                for field in ("body", "orelse", "finalbody"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        walk([n for n in inner if isinstance(n, ast.stmt)], prefix)
                for handler in getattr(node, "handlers", None) or ():
                    walk(handler.body, prefix)

    tree = _module_tree(path)
    if tree is not None:
        walk(tree.body, "")
    return found


@functools.cache
def _imported_names(path: str | None) -> dict[str, str]:
    """Local name -> full dotted name, from the module's imports."""
    tree = _module_tree(path)
    names: dict[str, str] = {}
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


@functools.cache
def _module_state(path: str | None) -> frozenset[str]:
    """Names the module binds at top level to something mutable (not a constant)."""
    tree = _module_tree(path)
    bound: set[str] = set()
    for node in tree.body if tree is not None else ():
        value = getattr(node, "value", None)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if isinstance(value, ast.List | ast.Dict | ast.Set | ast.Call | ast.ListComp):
            bound |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(bound)


class _Visitor(ast.NodeVisitor):
    def __init__(self, names: dict[str, str], state: frozenset[str]) -> None:
        self.names = names
        self.state = state
        self.found: list[tuple[int, str, str]] = []

    def full_name(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.names.get(node.id)
        return ".".join([head, *reversed(parts)]) if head else None

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = self.full_name(func)
        recorded = name is None or name.startswith(_OWN_PACKAGE)  # self. or dw.side_effect
        if isinstance(func, ast.Attribute) and func.attr == "side_effect" and recorded:
            self.visit(func)  # what a side effect is given is recorded: not a finding
            return
        if name in CALLS:
            self.found.append((node.lineno, f"{name}()", _advice(name)))
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            self._state_write(func.value, node.lineno)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.full_name(node)
        if name in ATTRIBUTES or (name or "").startswith("os.environ."):
            self.found.append((node.lineno, "os.environ", _advice("os.environ")))
            return
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self.found.append((node.lineno, f"module state {name}", _STATE_ADVICE))

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Subscript | ast.Attribute):
                self._state_write(target.value, node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Subscript | ast.Attribute):
            self._state_write(node.target.value, node.lineno)
        self.generic_visit(node)

    def _state_write(self, node: ast.expr, lineno: int) -> None:
        if isinstance(node, ast.Name) and node.id in self.state:
            self.found.append((lineno, f"module state {node.id}", _STATE_ADVICE))


_STATE_ADVICE = (
    "module-level state outlives a replay and differs between workers: keep it on self "
    "(rebuilt by every replay) or in an activity"
)


def _advice(name: str) -> str:
    return f"instead: {NonDeterministicCallError(name).replacement}"


def findings(classes: Iterator[type] | list[type]) -> list[Finding]:
    """Every finding of every class, in file order."""
    found: list[Finding] = []
    for cls in classes:
        found += scan(cls)
    return found
