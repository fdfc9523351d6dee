"""A new user's first minutes: clone the repository and run the README's commands exactly as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_readme_quick_start_from_a_fresh_clone(tmp_path):
    commands = readme_commands()
    assert commands == ["make demo", "make test"]
    clone = tmp_path / "airflow-paimon"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)

    demo = subprocess.run(commands[0].split(), cwd=clone, capture_output=True, text=True, timeout=1800)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    out = demo.stdout
    for title in ("Runs of paimon_merge_incremental", "Tags of demo.orders", "Snapshots kept"):
        assert title in out, out[-3000:]
    tags = re.findall(r"^\| (\d{4}-\d{2}-\d{2}) \| (\d+) +\| \w+ +\| (\d+) +\|$", out, re.M)
    assert len(tags) == 7 and all(int(rows) > 200_000 for _, _, rows in tags)
    assert len(re.findall(r"\| committed +\|", out)) == 7
    assert (clone / ".venv" / "bin" / "python").exists() and (clone / "demo" / "warehouse").is_dir()

    again = subprocess.run(commands[0].split(), cwd=clone, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("skipped (day already tagged)") == 7

    # `make test` is what CI itself runs; here it is only checked to be the README's suite command.
    dry = subprocess.run(["make", "-n", "test"], cwd=clone, capture_output=True, text=True, check=True)
    assert "pytest" in dry.stdout
    ci = (clone / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)
