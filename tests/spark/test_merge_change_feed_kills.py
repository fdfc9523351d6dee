"""Exactly-once propagation of a change feed through a consumer, with the merge application killed (SIGKILL) at each
point of its work: before its commit, and after the commit but before the consumer's advance. The application
runs as spark-submit runs it (the script, a spec file), stopped by `stop_at.py` where it enters the named
function and killed there by the test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_paimon.spark.common import application_path
from airflow_paimon.spark.merge.feed import FEED_PROPERTY

from .test_merge_change_feed import content, make_tables, rows

pytestmark = pytest.mark.spark

STOP_AT = str(Path(__file__).with_name("stop_at.py"))
BEFORE_COMMIT = "Transaction.commit"          # the feed's files are written, nothing is committed
BEFORE_ADVANCE = "ConsumerManager.advance"    # the commit landed, the consumer has not moved


def spec_file(tmp_path, cat) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"target": "db.dst", "warehouse": cat.warehouse, "commit_user": "airflow:sync.merge",
                                "source": {"change_feed": "db.src", "consumer_id": "sync"}}))
    return str(path)


def run_app(spec: str) -> dict:
    done = subprocess.run([sys.executable, application_path("merge_app"), "--spec-file", spec],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stdout.splitlines() if x.startswith("AIRFLOW_PAIMON_RESULT ")][-1]
    return json.loads(line.split(" ", 1)[1])


def run_app_killed_at(spec: str, function: str) -> None:
    """Start the application, wait until it stopped on entering `function`, and SIGKILL it there."""
    proc = subprocess.Popen([sys.executable, STOP_AT, function, "--spec-file", spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the application ended before reaching {function}: {proc.stderr.read()!r}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def feed_commits(dst) -> list[tuple[int, int, int]]:
    """(snapshot id, start, end) of every snapshot of the target that applied a range of the feed."""
    out = []
    for sid in range(1, dst.latest_snapshot().id + 1):
        snap = dst.snapshot(sid)
        if snap.commit_kind == "APPEND" and FEED_PROPERTY in (snap.properties or {}):
            doc = json.loads(snap.properties[FEED_PROPERTY])
            out.append((sid, doc["start"], doc["end"]))
    return out


def test_a_kill_before_the_commit_leaves_the_consumer_and_the_retry_applies_the_range_once(tmp_path, warehouse):
    src, dst = make_tables(warehouse, source_producer="input")
    src.write(rows([1, 2], ["a", "b"], [1.0, 2.0]))
    src.consumers.create("sync", 1)
    spec = spec_file(tmp_path, warehouse)
    run_app_killed_at(spec, BEFORE_COMMIT)
    assert dst.latest_snapshot() is None and src.consumers.get("sync") == 1
    result = run_app(spec)
    assert result["status"] == "committed" and src.consumers.get("sync") == 2
    assert content(dst) == content(src) and [(s, e) for _, s, e in feed_commits(dst)] == [(0, 1)]


def test_a_kill_after_the_commit_only_advances_on_retry_even_after_new_source_commits(tmp_path, warehouse):
    src, dst = make_tables(warehouse, source_producer="input")
    src.write(rows([1, 2], ["a", "b"], [1.0, 2.0]))
    src.consumers.create("sync", 1)
    spec = spec_file(tmp_path, warehouse)
    run_app_killed_at(spec, BEFORE_ADVANCE)
    landed = dst.latest_snapshot().id
    assert content(dst) == content(src) and src.consumers.get("sync") == 1
    src.write(rows([3], ["c"], [3.0]))            # the source moves on before the retry
    retry = run_app(spec)
    assert retry["status"] == "already_committed" and retry["snapshot_id"] == landed
    assert src.consumers.get("sync") == 2 and dst.latest_snapshot().id == landed
    following = run_app(spec)                     # the next run reads only what is new
    assert following["source"]["start"] == 1 and following["source"]["end"] == 2
    assert content(dst) == content(src) and [(s, e) for _, s, e in feed_commits(dst)] == [(0, 1), (1, 2)]


def test_propagation_over_five_runs_with_a_kill_at_each_step(tmp_path, warehouse):
    """Each run changes the source, then merges through the consumer: killed before the commit, killed after
    it, or not at all, then retried. The target ends equal to the source, and the applied ranges tile the source's
    history without overlap: no range was applied twice."""
    src, dst = make_tables(warehouse, source_producer="input")
    src.consumers.create("sync", 1)
    spec = spec_file(tmp_path, warehouse)
    kills = [BEFORE_COMMIT, BEFORE_ADVANCE, None, BEFORE_ADVANCE, BEFORE_COMMIT]
    for day, kill in enumerate(kills):
        base = day * 10
        src.write(rows([base + 1, base + 2, base + 3], [f"n{day}"] * 3, [float(day)] * 3))
        if day:
            src.write(rows([base - 9], [f"changed{day}"], [day * 100.0]))   # a key of the day before
            src.delete(pa.table({"id": [base - 8]}))
        if kill is not None:
            run_app_killed_at(spec, kill)
            assert src.consumers.get("sync") <= src.latest_snapshot().id
        run_app(spec)
        assert content(dst) == content(src), f"day {day}"
        assert src.consumers.get("sync") == src.latest_snapshot().id + 1
    applied = feed_commits(dst)
    assert len(applied) == len(kills)
    assert [s for _, s, _ in applied] == [0] + [e for _, _, e in applied[:-1]]   # contiguous, none twice
    assert applied[-1][2] == src.latest_snapshot().id
    assert len({dst.snapshot(sid).commit_identifier for sid, _, _ in applied}) == len(kills)
