"""Every benchmark script runs end to end at a tiny size, so that a change of the library's API cannot leave one
broken until someone next measures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# Each starts a Python process that builds tables: as slow as an end-to-end test, run by `make test` only.
pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[1]
SECONDS_AND_RATIO = re.compile(r"\s\d+\.\d{3}\s+\d+\.\d{2}x\s")


def run(script: str, *args: str, timeout: int = 300) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def ratio_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if SECONDS_AND_RATIO.search(line)]


def test_format_io_runs():
    out = run("format_io.py", "--rows", "1000", "--repeat", "1")
    assert len(ratio_lines(out)) == 9, out
    assert "target <= 1.5x" in out and "target <= 2.0x" in out


def test_changes_runs():
    out = run("changes.py", "--rows", "1000", "--repeat", "1")
    lines = ratio_lines(out)
    assert len(lines) == 9, out
    assert sum("target" in line for line in lines) == 4, out
    assert sum("once per file" in line for line in lines) == 2, out
    assert re.search(r"feed of 1,000 inserts batch by batch: range .* MiB", out), out
    assert re.search(r"processor time of the upserts .*: none \d+ ms, lookup \d+ ms, \d+\.\d\dx", out), out
    assert re.search(r"diff from 'before' across a full compaction .*: peak growth of pyarrow allocation \d+ MiB "
                     r"with each bucket compared whole, \d+ MiB in slices of [\d,]+ rows", out), out


def test_tags_expire_runs():
    out = run("tags_expire.py", "--snapshots", "30", "--files-per-commit", "2", "--repeats", "2")
    assert "tag creation, median ms" in out, out
    assert "plan matched: True" in out, out


@pytest.mark.objectstore
def test_object_store_runs():
    out = run("object_store.py", "--snapshots", "30", "--commits", "3")
    assert len(ratio_lines(out)) == 3, out
    assert re.search(r"median requests per commit: \d+ with 30 snapshots, \d+ with 10", out), out
    assert re.search(r"expiry of 3\d snapshots", out) and re.search(r"\d+\.\d per expired snapshot", out), out


@pytest.mark.spark
def test_merge_runs():
    out = run("merge.py", "--sizes", "1000", "--repeat", "1", timeout=900)
    assert "N=1,000: upsert on Spark / floor (in-job)" in out, out
    assert re.search(r"ours: plain upsert\s+\d+\.\d+ /", out), out


def test_ui_pages_runs():
    out = run("ui_pages.py", "--snapshots", "60", "--tags", "3", "--repeats", "1")
    assert re.search(r"expiry preview +\d+\.\d+ s +\(\d+ of \d+ expirable", out), out
    assert "same files: True" in out, out
