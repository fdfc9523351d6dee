"""The format library's import graph: every module imports alone, the modules form no cycle, and none needs
Airflow or Spark.

The graph has an edge for every import of a format module that runs: at module level and inside functions (an
import moved into a function to dodge a cycle still is one). Imports under ``if TYPE_CHECKING:`` never run and
are left out.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_paimon.format

PACKAGE = "airflow_paimon.format"
ROOT = Path(airflow_paimon.format.__file__).parent


def module_names() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PACKAGE, *parts])] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run (TYPE_CHECKING blocks skipped)."""
    out: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(child)
            stack.append(child)
    return out


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """Absolute names of the modules `name` imports (for `from x import y`: x.y when that is a module), but not
    its own enclosing packages."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
            continue
        if node.level:
            base = package.split(".")
            base = base[:len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        out.add(target)
        out.update(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known)
    # A package is initialised before any of its modules: `from . import x` needs x, not its own package again.
    return {m for m in out if not name.startswith(m + ".")}


@functools.cache
def graph() -> dict[str, set[str]]:
    modules = module_names()
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle among the format modules, as a path that ends where it starts; None for a DAG."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges or nxt == node:
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_lazy_imports_and_skips_type_checking_ones(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("from typing import TYPE_CHECKING\nfrom .a import x\nif TYPE_CHECKING:\n    from .b import y\n"
                   "def f():\n    from .c import z\n")
    got = imported_modules(f"{PACKAGE}.m", mod, set())
    assert {f"{PACKAGE}.a", f"{PACKAGE}.c"} <= got and f"{PACKAGE}.b" not in got
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_among_format_modules():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle in the format library: " + " -> ".join(cycle or [])


def test_format_modules_need_neither_airflow_nor_spark():
    bad = {name: sorted(m for m in mods if m.split(".")[0] in ("airflow", "pyspark"))
           for name, mods in graph().items()}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"format modules importing Airflow or Spark: {bad}"


@pytest.mark.subprocess
def test_every_format_module_imports_in_a_fresh_interpreter():
    """Every module, in a fresh interpreter (nothing imported before, so no earlier import hides a broken one),
    without loading Airflow or pyspark on the way; the CLI last, which runs where neither is installed. Cycles
    are the graph's business above: it sees them whatever order modules happen to be imported in."""
    check = ("import importlib, sys\n"
             "for name in sys.argv[1:]:\n"
             "    importlib.import_module(name)\n"
             "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark'))\n"
             "assert not loaded, loaded\n")
    names = [*sorted(module_names()), "airflow_paimon.cli"]
    run = subprocess.run([sys.executable, "-c", check, *names], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
