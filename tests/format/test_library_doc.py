"""docs/library.md runs as written: its Python snippets, in order, in one warehouse (later ones use the tables the
earlier ones made), each failing on any exception or failed assertion it shows."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "library.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_library_page_runs_in_order(tmp_path, monkeypatch):
    blocks = PYTHON_BLOCK.findall(PAGE.read_text())
    for shown in (".transaction(", "CommitId(", ".inspect.", ".maintenance."):
        assert any(shown in b for b in blocks), f"docs/library.md shows no {shown} in a snippet"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/library.md[{i}]", "exec"), namespace)
