"""`airflow-paimon changes`, `consumers` and `consumer reset|delete`, driven in-process through main(argv)."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.parquet as pq
import pytest

from .cli_helpers import run
from .format.upkeep_helpers import delete, make_table, tree_digest, upsert


@pytest.fixture
def wh(tmp_path, monkeypatch):
    t = make_table(tmp_path)
    upsert(t, [1, 2], 1)       # snapshot 1
    t.create_tag("monday")
    upsert(t, [1], 2)          # 2
    delete(t, [2])             # 3
    upsert(t, [3], 1)          # 4
    monkeypatch.setenv("PAIMON_WAREHOUSE", str(tmp_path))
    return tmp_path, t


def test_changes_between_a_tag_and_a_snapshot_as_json(wh, capsys):
    code, out, err = run(capsys, "changes", "db.t", "--from", "monday", "--to", "3", "--mode", "diff",
                         "--format", "json")
    assert code == 0, err
    got = [(r["_change_type"], r["id"], r["v"], r["_commit_version"]) for r in json.loads(out)]
    assert got == [("delete", 2, 1, 3), ("update_preimage", 1, 1, 3), ("update_postimage", 1, 2, 3)]


def test_changes_as_csv_and_parquet_with_columns(wh, capsys, tmp_path):
    code, out, err = run(capsys, "changes", "db.t", "--from", "1", "--mode", "delta", "--columns", "id",
                         "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["id"], r["_change_type"]) for r in rows] == [("1", "insert"), ("2", "delete"), ("3", "insert")]
    assert list(rows[0]) == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    target = tmp_path / "out.parquet"
    code, out, err = run(capsys, "changes", "db.t", "--from", "monday", "--format", "parquet",
                         "--output", str(target))
    assert code == 0, err
    assert pq.read_table(target).num_rows == 3 and "wrote 3 change row(s)" in err
    code, out, err = run(capsys, "changes", "db.t", "--from", "3", "--to", "4", "--mode", "delta")
    assert code == 0 and out.splitlines()[0].split() == ["id", "p", "v", "_change_type", "_commit_version",
                                                         "_commit_timestamp"]
    assert len(out.splitlines()) == 3 and "insert" in out.splitlines()[2]
    code, out, err = run(capsys, "changes", "db.t", "--from", "4", "--format", "csv")
    assert code == 0 and out.startswith('"id"') and len(out.splitlines()) == 1


def test_consumer_read_advance_list_reset_delete(wh, capsys):
    _, t = wh
    t.consumers.create("etl", 2)
    code, out, err = run(capsys, "changes", "db.t", "--consumer", "etl", "--mode", "delta", "--format", "json")
    assert code == 0, err
    assert [r["_commit_version"] for r in json.loads(out)] == [2, 3, 4]
    assert t.consumers.get("etl") == 2           # reading alone does not move it
    code, out, err = run(capsys, "changes", "db.t", "--consumer", "etl", "--mode", "delta", "--advance",
                         "--format", "json")
    assert code == 0 and "now at snapshot 5" in err
    assert t.consumers.get("etl") == 5
    code, out, err = run(capsys, "consumers", "db.t", "--json")
    assert json.loads(out) == [{"consumer_id": "etl", "next_snapshot_id": 5}]
    code, out, err = run(capsys, "consumer", "reset", "db.t", "etl", "--to", "3")
    assert code == 0 and t.consumers.get("etl") == 3
    code, out, err = run(capsys, "consumer", "delete", "db.t", "etl")
    assert code == 0 and t.consumers.positions() == {}
    code, out, err = run(capsys, "consumers", "db.t")
    assert "(no consumers)" in out


@pytest.mark.parametrize("argv, words", [
    (["changes", "db.t", "--from", "4", "--to", "2"], "after"),
    (["changes", "db.t"], "--from"),
    (["changes", "db.t", "--from", "1", "--mode", "changelog"], "mode='delta'"),
    (["changes", "db.t", "--from", "1", "--advance"], "--consumer"),
    (["changes", "db.t", "--from", "nowhere-tag"], "neither a tag"),
    (["changes", "db.t", "--consumer", "ghost"], "does not exist"),
    (["consumer", "reset", "db.t", "ghost", "--to", "2"], "does not exist"),
    (["consumer", "delete", "db.t", "../x"], "consumer id"),
])
def test_bad_input_is_one_line_and_changes_nothing(wh, capsys, argv, words):
    root, _ = wh
    before = tree_digest(root)
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert err.count("\n") == 1 and words in err
    assert tree_digest(root) == before
