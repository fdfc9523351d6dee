"""The documentation builds without warnings, and its code snippets run as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def _blocks(pattern: re.Pattern, pages: list[Path] = DOCS) -> list[tuple[str, int, str]]:
    out = []
    for page in pages:
        for i, block in enumerate(pattern.findall(page.read_text())):
            out.append((str(page.relative_to(ROOT)), i, block))
    return out


@pytest.mark.docs
def test_mkdocs_build_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


AIRFLOW_IMPORT = re.compile(
    r"^\s*(from|import) (airflow\b|airflow_paimon\.(operators|sensors|triggers|hooks|timetables|ui)\b)", re.M)


def _snippets() -> list:
    """Every python block but library.md's (they build on each other: tests/format/test_library_doc.py runs them
    in order); a block that imports Airflow, itself or through the provider's Airflow modules, is an `airflow`
    test, as slow as the others that do."""
    return [pytest.param(page, index, code, marks=[pytest.mark.airflow] if AIRFLOW_IMPORT.search(code) else [])
            for page, index, code in _blocks(PYTHON_BLOCK, [p for p in DOCS if p.name != "library.md"])]


@pytest.mark.parametrize("page, index, code", _snippets(), ids=lambda v: str(v)[:40])
def test_python_snippets_run(page, index, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page}[{index}]", "exec"), {"__name__": "__docs__"})


def _cli_lines() -> list[tuple[str, str]]:
    """`airflow-paimon ...` commands shown in the docs (continuation lines joined)."""
    out = []
    for page, _, block in _blocks(BASH_BLOCK):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("airflow-paimon "):
                out.append((page, line))
    return out


@pytest.mark.parametrize("page, line", _cli_lines(), ids=lambda v: str(v)[:60])
def test_cli_commands_in_docs_parse(page, line):
    """Every CLI line in the docs is accepted by the parser (the commands themselves are tested in test_cli)."""
    from airflow_paimon.cli import build_parser

    build_parser().parse_args(shlex.split(line)[1:])


def test_cli_page_runs_as_written(tmp_path, monkeypatch, capsys):
    """The commands of docs/cli.md, in order, against a table with commits on the days they name."""
    import datetime as dt

    from airflow_paimon.cli import main
    from tests.e2e.tables import commit_at, create_table

    warehouse = str(tmp_path / "warehouse")
    table = create_table(warehouse, "sales.orders", {"bucket": "2"})
    utc = dt.timezone.utc
    for i, when in enumerate([dt.datetime(2026, 11, 19, 10, tzinfo=utc), dt.datetime(2026, 11, 20, 10, tzinfo=utc),
                              dt.datetime(2026, 11, 20, 23, tzinfo=utc), dt.datetime(2026, 11, 21, 3, tzinfo=utc)]):
        commit_at(table, when, i, i + 10)
    table.consumers.create("billing", 1)
    monkeypatch.setenv("PAIMON_WAREHOUSE", warehouse)
    monkeypatch.chdir(tmp_path)
    lines = [line for page, line in _cli_lines() if page == "docs/cli.md"]
    assert len(lines) == 17
    for line in lines:
        assert main(shlex.split(line)[1:]) == 0, (line, capsys.readouterr())
    assert (tmp_path / "orders.csv").read_text().count("\n") >= 2
    header = (tmp_path / "changes.csv").read_text().splitlines()[0]
    assert "_change_type" in header and "value" not in header
    assert table.consumers.positions() == {}
    assert table.tags.names() == [] and table.latest_snapshot().id == 3
