"""The repository keeps the lint and type rules of pyproject.toml ([tool.ruff], [tool.mypy]): the checks CI runs,
not conventions."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORMAT = ROOT / "airflow_paimon" / "format"


@pytest.mark.subprocess
def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    proc = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.subprocess
def test_mypy_finds_nothing():
    # Incremental: the cache under .mypy_cache makes a re-run take seconds instead of most of a minute.
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _is_any(annotation: ast.expr) -> bool:
    """`Any`, `"Any"`, `typing.Any` or a union holding one (`Any | None`, `Optional[Any]`)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _is_any(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any"
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _is_any(annotation.left) or _is_any(annotation.right)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name) \
            and annotation.value.id in ("Optional", "Union"):
        inner = annotation.slice
        return any(_is_any(e) for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner]))
    return False


def public_functions_returning_any(tree: ast.Module) -> list[str]:
    """Module-level functions and methods of module-level classes, neither private, declared to return Any."""
    found = []
    scopes: list[tuple[str, ast.AST]] = [("", tree)]
    scopes += [(f"{c.name}.", c) for c in tree.body if isinstance(c, ast.ClassDef) and not c.name.startswith("_")]
    for prefix, scope in scopes:
        for node in ast.iter_child_nodes(scope):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None \
                    and not node.name.startswith("_") and _is_any(node.returns):
                found.append(f"{prefix}{node.name} (line {node.lineno})")
    return found


def test_the_format_library_returns_no_any():
    """mypy's warn_return_any catches an Any returned from a typed function, not a function declared `-> Any`:
    callers of such a method lose every check, so none is public in the format library."""
    found = [f"{path.relative_to(ROOT)}: {name}" for path in sorted(FORMAT.rglob("*.py"))
             for name in public_functions_returning_any(ast.parse(path.read_text(), str(path)))]
    assert not found, "public functions declared to return Any:\n" + "\n".join(found)


def test_the_any_check_sees_every_spelling():
    source = '''
from typing import Any, Optional
import typing
def a() -> Any: ...
def b() -> "Any": ...
def c() -> Any | None: ...
def d() -> Optional[Any]: ...
def e() -> typing.Any: ...
def _private() -> Any: ...
def fine() -> dict[str, Any]: ...
class Table:
    def latest(self) -> "Any": ...
    def _hidden(self) -> Any: ...
    def typed(self) -> int: ...
'''
    found = public_functions_returning_any(ast.parse(source))
    assert [f.split(" ")[0] for f in found] == ["a", "b", "c", "d", "e", "Table.latest"]
