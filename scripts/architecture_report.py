"""Architecture figures for one git revision of ``durable_workflow``.

    .venv/bin/python scripts/architecture_report.py 8db5afd HEAD

For each revision (its tree is extracted with ``git archive`` into a temporary
directory, so the working tree is never touched) this prints:

* lines and modules of ``durable_workflow/`` (migrations left out);
* the ten largest functions, in lines (``def`` to its last line);
* per package, the modules in an import cycle, counted two ways:
  *at import time* (module-level imports only, with the parent package's
  ``__init__`` that Python runs before a submodule), and *among siblings*
  (function-local imports included, the package ``__init__`` left out: what
  import-linter's ``acyclic_siblings`` contract checks);
* function-local imports of the package's own modules, in all and per 1,000 lines;
* mypy errors per package in strict mode with every ``ignore_errors`` override off
  (one configuration for all revisions: ``--strict``, the django-stubs plugin and
  the revision's own ``tests.settings``). ``--no-mypy`` skips this (it takes minutes).

Imports under ``if TYPE_CHECKING:`` never run, so they are not counted anywhere.
Only the standard library and the venv's mypy are used.
"""

from __future__ import annotations

import argparse
import ast
import collections
import dataclasses
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = "durable_workflow"
REPO = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Module:
    name: str  # dotted; a package is named by its __init__
    path: Path
    tree: ast.Module
    lines: int
    is_package: bool
    top: set[str] = dataclasses.field(default_factory=set)  # module-level imports
    local: set[str] = dataclasses.field(default_factory=set)  # function-local imports
    #: The durable_workflow modules each function-local import statement runs.
    local_statements: list[set[str]] = dataclasses.field(default_factory=list)


def extract(rev: str, into: Path) -> str:
    """The revision's tree under ``into``; returns its short hash."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", sha],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryFile() as raw:
        raw.write(archive)
        raw.seek(0)
        with tarfile.open(fileobj=raw) as tar:
            tar.extractall(into, filter="data")
    return sha


def load(tree_root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((tree_root / ROOT).rglob("*.py")):
        relative = path.relative_to(tree_root).with_suffix("")
        if "migrations" in relative.parts:
            continue
        parts = list(relative.parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        text = path.read_text()
        modules[".".join(parts)] = Module(
            ".".join(parts), path, ast.parse(text), len(text.splitlines()), package
        )
    for module in modules.values():
        _collect_imports(module, modules)
    return modules


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return hidden


def _in_functions(tree: ast.Module) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside.update(id(inner) for inner in ast.walk(node) if inner is not node)
    return inside


def _targets(
    node: ast.Import | ast.ImportFrom, module: Module, known: dict[str, Module]
) -> set[str]:
    """The durable_workflow modules an import statement runs (parent packages included)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            package = module.name.split(".")
            if not module.is_package:
                package = package[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    found: set[str] = set()
    for name in names:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            candidate = ".".join(parts[:end])
            if candidate in known:
                found.add(candidate)
    found.discard(module.name)
    return found


def _collect_imports(module: Module, known: dict[str, Module]) -> None:
    hidden = _type_checking_nodes(module.tree)
    inside = _in_functions(module.tree)
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in hidden:
            continue
        targets = _targets(node, module, known)
        if id(node) in inside:
            module.local |= targets
            if targets:
                module.local_statements.append(targets)
        else:
            module.top |= targets


def packages(modules: dict[str, Module]) -> list[str]:
    return sorted(name for name, module in modules.items() if module.is_package and name != ROOT)


def _sccs(nodes: set[str], edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root] & nodes)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child] & nodes))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def import_time_cycle(modules: dict[str, Module], package: str) -> set[str]:
    """Modules of ``package`` (its ``__init__`` included) in a cycle of module-level imports."""
    nodes = {name for name in modules if name == package or name.startswith(package + ".")}
    edges = {name: modules[name].top for name in nodes}
    return set().union(*_sccs(nodes, edges)) if nodes else set()


def sibling_cycle(modules: dict[str, Module], package: str) -> set[str]:
    """Direct children of ``package`` in a cycle, function-local imports included; a
    subpackage stands for everything under it, the package ``__init__`` is left out."""
    prefix = package + "."

    def child_of(name: str) -> str | None:
        if not name.startswith(prefix):
            return None
        return prefix + name[len(prefix) :].split(".")[0]

    nodes = {child for name in modules if (child := child_of(name)) is not None}
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for name, module in modules.items():
        source = child_of(name)
        if source is None:
            continue
        for target in module.top | module.local:
            child = child_of(target)
            if child is not None and child != source:
                edges[source].add(child)
    return set().union(*_sccs(nodes, edges)) if nodes else set()


def largest_functions(modules: dict[str, Module], count: int = 10) -> list[tuple[int, str]]:
    sizes: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str, module: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                sizes.append((size, f"{module}:{name}"))
                visit(child, name + ".", module)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", module)

    for name, module in modules.items():
        visit(module.tree, "", name.removeprefix(ROOT + "."))
    return sorted(sizes, key=lambda item: (-item[0], item[1]))[:count]


MYPY_CONFIG = """[mypy]
python_version = 3.11
strict = True
plugins = mypy_django_plugin.main
files = durable_workflow

[mypy.plugins.django-stubs]
django_settings_module = tests.settings
"""

_ERROR = re.compile(r"^(durable_workflow/[^:]+\.py):\d+(?::\d+)?: error:", re.M)


def mypy_errors(tree_root: Path, sha: str) -> dict[str, int]:
    """mypy strict error counts by package (``durable_workflow/<first part>``)."""
    config = tree_root / "mypy-report.ini"
    config.write_text(MYPY_CONFIG)
    mypy = Path(sys.executable).with_name("mypy")
    result = subprocess.run(
        [
            str(mypy),
            "--config-file",
            str(config),
            "--cache-dir",
            str(Path(tempfile.gettempdir()) / f"arch-mypy-cache-{sha}"),
            "--no-error-summary",
            "--hide-error-context",
        ],
        cwd=tree_root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree_root)},
    )
    counts: collections.Counter[str] = collections.Counter()
    for path in _ERROR.findall(result.stdout):
        parts = Path(path).parts
        counts[parts[1].removesuffix(".py") if len(parts) > 2 else "(top level)"] += 1
    if not counts and result.returncode not in (0, 1):
        raise RuntimeError(f"mypy failed at {sha}:\n{result.stdout}\n{result.stderr}")
    return dict(counts)


def report(rev: str, *, run_mypy: bool) -> dict[str, str]:
    """Print the revision's figures; return the headline ones, for the comparison."""
    with tempfile.TemporaryDirectory(prefix="arch-") as tmp:
        root = Path(tmp)
        sha = extract(rev, root)
        modules = load(root)
        lines = sum(module.lines for module in modules.values())
        print(f"## {rev} ({sha})\n")
        print(f"- lines in {ROOT}/ (migrations left out): {lines:,}")
        print(f"- modules: {len(modules)}")
        local = sum(len(module.local_statements) for module in modules.values())
        print(
            f"- function-local imports of {ROOT} modules: {local} "
            f"({1000 * local / lines:.2f} per 1,000 lines)"
        )
        cyclic = {
            package.removeprefix(ROOT + "."): len(found)
            for package in packages(modules)
            if (found := sibling_cycle(modules, package))
        }
        print(f"- packages with a sibling cycle: {cyclic or 'none'}")
        print("\nLargest functions (lines):\n")
        largest = largest_functions(modules)
        for size, name in largest:
            print(f"- {size:4d}  {name}")
        errors = mypy_errors(root, sha) if run_mypy else {}
        header = (
            "\n| package | modules | lines | in an import-time cycle | in a sibling cycle "
            "| function-local imports | of the package's own | own per 1,000 lines |"
        )
        print(header + (" mypy strict |" if run_mypy else ""))
        print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if run_mypy else ""))
        for package in packages(modules):
            members = [m for n, m in modules.items() if n == package or n.startswith(package + ".")]
            package_lines = sum(m.lines for m in members)
            local = sum(len(m.local_statements) for m in members)
            inside = sum(
                any(t.startswith(package + ".") or t == package for t in targets)
                for m in members
                for targets in m.local_statements
            )
            short = package.removeprefix(ROOT + ".")
            row = (
                f"| {short} | {len(members)} | {package_lines:,} "
                f"| {len(import_time_cycle(modules, package))} "
                f"| {len(sibling_cycle(modules, package))} | {local} | {inside} "
                f"| {1000 * inside / max(package_lines, 1):.2f} |"
            )
            if run_mypy:
                row += f" {errors.get(short.split('.')[0], 0) if '.' not in short else ''} |"
            print(row)
        if run_mypy:
            total = sum(errors.values())
            named = {package.split(".")[1] for package in packages(modules)}
            top = {key: value for key, value in errors.items() if key not in named}
            print(f"\nmypy strict errors: {total} in all; outside the packages above: {top or 0}")
        print()
        return _headline(modules, sha, lines, largest, errors if run_mypy else None)


def _headline(
    modules: dict[str, Module],
    sha: str,
    lines: int,
    largest: list[tuple[int, str]],
    errors: dict[str, int] | None,
) -> dict[str, str]:
    executor = f"{ROOT}.executor"
    members = [m for n, m in modules.items() if n == executor or n.startswith(executor + ".")]
    executor_lines = sum(m.lines for m in members)
    own = sum(
        any(t.startswith(executor + ".") for t in targets)
        for m in members
        for targets in m.local_statements
    )
    local = sum(len(module.local_statements) for module in modules.values())
    sizes = [size for size, _ in largest_functions(modules, count=10**6)]
    cyclic = [p for p in packages(modules) if sibling_cycle(modules, p)]
    figures = {
        "revision": sha,
        f"lines in {ROOT}/ (migrations left out)": f"{lines:,}",
        "modules": str(len(modules)),
        "largest function (lines)": f"{largest[0][0]} (`{largest[0][1]}`)",
        "functions over 50 lines": str(sum(size > 50 for size in sizes)),
        "executor modules": str(len(members)),
        "executor modules in an import-time cycle": str(len(import_time_cycle(modules, executor))),
        "executor modules in a sibling cycle": str(len(sibling_cycle(modules, executor))),
        "packages with a sibling cycle": str(len(cyclic)),
        "function-local imports of the executor's own modules": (
            f"{own} ({1000 * own / executor_lines:.2f} per 1,000 lines)"
        ),
        f"function-local imports of {ROOT} modules, all packages": (
            f"{local} ({1000 * local / lines:.2f} per 1,000 lines)"
        ),
    }
    if errors is not None:
        figures["mypy strict errors"] = str(sum(errors.values()))
        for package in ("engine", "executor", "store"):
            figures[f"mypy strict errors in {package}/"] = str(errors.get(package, 0))
    return figures


def compare(headlines: list[tuple[str, dict[str, str]]]) -> None:
    print("| figure | " + " | ".join(f"`{rev}`" for rev, _ in headlines) + " |")
    print("| --- |" + " ---: |" * len(headlines))
    for key in headlines[0][1]:
        if key != "revision":
            print(f"| {key} | " + " | ".join(h.get(key, "") for _, h in headlines) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("revisions", nargs="+", help="git revisions, e.g. 8db5afd HEAD")
    parser.add_argument("--no-mypy", action="store_true", help="skip the mypy counts")
    args = parser.parse_args()
    headlines = [(rev, report(rev, run_mypy=not args.no_mypy)) for rev in args.revisions]
    if len(headlines) > 1:
        compare(headlines)


if __name__ == "__main__":
    main()
