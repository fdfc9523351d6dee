"""The in-process MERGE engine without Spark: which engine `auto` picks and why, exactly-once commits, bad input
that changes nothing, and the command line. (Its agreement with Spark is tests/spark/test_local_merge_differential.)"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from airflow_paimon.cli import main
from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import DuplicateKeyError, MergeClauseError
from airflow_paimon.local_merge import LocalMergeRefused, merge_here_or_refuse, merge_in_process
from airflow_paimon.merge import matched_delete, matched_update, not_matched_by_source_delete, not_matched_insert

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string()), pa.field("v", pa.float64())])


@pytest.fixture
def table(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "3"})
    t.write(pa.table({"id": list(range(10)), "name": [f"n{i}" for i in range(10)],
                      "v": [float(i) for i in range(10)]}, schema=SCHEMA))
    return cat.get_table("db.t")


def source(tmp_path, ids, name="s.parquet") -> str:
    path = str(tmp_path / name)
    pq.write_table(pa.table({"id": ids, "name": [f"s{i}" for i in ids], "v": [i * 10.0 for i in ids]}), path)
    return path



def _walk(root):
    import os
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]


def test_auto_merges_in_process_and_says_why(table, tmp_path):
    clauses = [matched_delete(condition="s.v > 60"), matched_update(set={"v": "s.v + t.v"}), not_matched_insert(),
               not_matched_by_source_delete(condition="t.id < 2")]
    d = merge_here_or_refuse(table, source(tmp_path, [5, 6, 7, 20]), clauses=[c.to_dict() for c in clauses],
                             commit_user="u", commit_identifier=7)
    assert d.result is not None and d.result["engine"] == "local" and "budget" in d.reason
    assert d.result["rows"] == {"inserted": 1, "updated": 2, "deleted": 3}
    rows = {r["id"]: r["v"] for r in table.read().to_pylist()}
    assert rows[5] == 55.0 and rows[6] == 66.0 and 7 not in rows and 0 not in rows and rows[20] == 200.0
    again = merge_here_or_refuse(table, source(tmp_path, [5, 6, 7, 20]), clauses=[c.to_dict() for c in clauses],
                                 commit_user="u", commit_identifier=7)
    assert again.result["status"] == "already_committed"
    assert {r["id"]: r["v"] for r in table.read().to_pylist()} == rows


@pytest.mark.parametrize("why, kwargs, reason", [
    ("csv", {"source_format": "csv"}, "source format is csv"),
    ("division", {"clauses": [{"when": "matched", "action": "update", "set": {"v": "s.v / t.v"}}]}, "Div"),
    ("session time", {"clauses": [{"when": "matched", "action": "delete", "condition": "current_date() > '2020'"}]},
     "CurrentDate"),
    ("double to string", {"clauses": [{"when": "matched", "action": "update", "set": {"name": "CAST(s.v AS STRING)"}}]},
     "to a string"),
    ("budget", {"memory_budget": 1000}, "budget"),
])
def test_auto_leaves_to_spark_what_it_cannot_run_exactly(table, tmp_path, why, kwargs, reason):
    path = source(tmp_path, [1, 2])
    if why == "csv":
        path = str(tmp_path / "s.csv")
        pcsv.write_csv(pa.table({"id": [1], "name": ["x"], "v": [1.0]}), path)
    before = _walk(table.path)
    d = merge_here_or_refuse(table, path, **kwargs)
    assert d.result is None and reason in d.reason
    with pytest.raises(LocalMergeRefused, match=reason):
        merge_here_or_refuse(table, path, engine="local", **kwargs)
    assert _walk(table.path) == before


@pytest.mark.parametrize("clauses, error, match", [
    ([matched_update(set={"v": "s.nope"})], MergeClauseError, "s.nope, which is not a column of the source"),
    ([matched_update(set={"v": "s.name"})], Exception, "cannot store a string value into the double"),
    ([matched_update(condition="s.v + 1")], MergeClauseError, "not boolean"),
    ([matched_update(set={"id": "s.id + 1"})], MergeClauseError, "Can't update the primary key"),
])
def test_bad_input_gets_a_clear_error_and_changes_nothing(table, tmp_path, clauses, error, match):
    before = _walk(table.path)
    with pytest.raises(error, match=match):
        merge_in_process(table, pq.read_table(source(tmp_path, [1, 2])), clauses)
    assert _walk(table.path) == before


def test_a_duplicate_source_key_is_refused(table):
    before = _walk(table.path)
    with pytest.raises(DuplicateKeyError, match=r"several rows for one target primary key \(id=3"):
        merge_in_process(table, pa.table({"id": [3, 3], "name": ["a", "b"], "v": [1.0, 2.0]}))
    assert _walk(table.path) == before


def test_the_cli_merges_in_process(table, tmp_path, capsys):
    clauses = tmp_path / "clauses.json"
    clauses.write_text(json.dumps([{"when": "matched", "action": "update", "set": {"name": "upper(s.name)"}}]))
    code = main(["merge", "db.t", "--warehouse", str(tmp_path / "wh"), "--source", source(tmp_path, [4, 40]),
                 "--clauses", str(clauses), "--engine", "local", "--commit-user", "cli", "--commit-id", "1"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["engine"] == "local" and out["rows"] == {"inserted": 0, "updated": 1, "deleted": 0}
    assert {r["id"]: r["name"] for r in table.read().to_pylist()}[4] == "S4"
    code = main(["merge", "db.t", "--warehouse", str(tmp_path / "wh"), "--source", source(tmp_path, [4]),
                 "--clauses", '[{"when": "matched", "action": "update", "set": {"v": "s.v / 2"}}]',
                 "--engine", "local"])
    assert code == 1 and "engine='local' cannot run this MERGE" in capsys.readouterr().err


def test_a_plain_upsert_reads_no_target_data(table, tmp_path):
    d = merge_here_or_refuse(table, source(tmp_path, [5, 20]))
    assert d.result["mode"] == "upsert" and d.result["target_rows_read"] == 0
    assert d.result["rows"] == {"inserted": 2, "updated": 0, "deleted": 0}
    assert {r["id"]: r["v"] for r in table.read().to_pylist()}[5] == 50.0 and table.read().num_rows == 11


@pytest.mark.parametrize("producer, vectors", [("lookup", False), ("input", False), ("lookup", True)])
def test_a_merge_into_a_changelog_table_writes_the_producers_changelog(tmp_path, producer, vectors):
    """lookup: the in-process MERGE and Table.write of the same changes give the same change feed; input: the
    rows the MERGE wrote, with the kinds it knows (an update +U, an insert +I), as the Spark path writes them.
    `vectors`: a table with deletion vectors, whose one COMPACT snapshot per write carries the changelog."""
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.float64())])
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    made = []
    for name in ("merged", "written"):
        t = cat.create_table(f"db.{name}", schema, primary_keys=["id"],
                             options={"bucket": "2", "changelog-producer": producer,
                                      "deletion-vectors.enabled": str(vectors).lower()})
        t.write(pa.table({"id": [1, 2, 3], "v": [1.0, 2.0, 3.0]}, schema=schema))
        made.append(t)
    merged, written = made
    before = merged.latest_snapshot().id
    merge_in_process(merged, pa.table({"id": [2, 3, 9], "v": [20.0, 3.0, 9.0]}, schema=schema),
                     [matched_update(condition="s.v > t.v"), not_matched_insert()])
    written.write(pa.table({"id": [2, 9], "v": [20.0, 9.0]}, schema=schema))

    def feed(t):
        rows = t.changes(before, t.latest_snapshot().id, mode="changelog").read_all().to_pylist()
        return sorted((r["_change_type"], r["id"], r["v"]) for r in rows)

    if producer == "lookup":
        assert feed(merged) == feed(written) and ("update_preimage", 2, 2.0) in feed(merged)
    else:
        assert feed(merged) == [("insert", 9, 9.0), ("update_postimage", 2, 20.0)]


def test_a_dynamic_bucket_table_merges_in_process_as_a_fixed_bucket_one(table, tmp_path):
    """The MERGE reads each source key's target row from the bucket the HASH index gives it, and writes updates
    there: one row per key, the same rows as on the fixed-bucket table."""
    cat = Catalog(str(tmp_path / "wh"))
    dynamic = cat.create_table("db.d", SCHEMA, primary_keys=["id"],
                               options={"bucket": "-1", "dynamic-bucket.target-row-num": "4"})
    dynamic.write(table.read())
    clauses = [c.to_dict() for c in (matched_delete(condition="s.v > 60"), matched_update(set={"v": "s.v + t.v"}),
                                     not_matched_insert(), not_matched_by_source_delete(condition="t.id < 2"))]
    results = [merge_here_or_refuse(t, source(tmp_path, [5, 6, 7, 9, 20, 21, 22, 23]), clauses=clauses,
                                    engine="local").result for t in (table, dynamic)]
    assert results[0]["rows"] == results[1]["rows"] == {"inserted": 4, "updated": 2, "deleted": 4}
    got = sorted(tuple(r.values()) for r in dynamic.read().to_pylist())
    assert len({r[0] for r in got}) == len(got) and got == sorted(tuple(r.values()) for r in table.read().to_pylist())
    buckets = {e.bucket for e in dynamic.file_entries(dynamic.latest_snapshot())}
    assert buckets == {0, 1, 2, 3}, buckets   # 10 keys in 0..2 (4, 4, 2), the 4 new ones fill 2 and open 3


def test_auto_hands_a_dynamic_bucket_merge_it_cannot_run_here_to_spark(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    dynamic = cat.create_table("db.d", SCHEMA, primary_keys=["id"], options={"bucket": "-1"})
    dynamic.write(pa.table({"id": [1], "name": ["a"], "v": [1.0]}, schema=SCHEMA))
    before = _walk(dynamic.path)
    decision = merge_here_or_refuse(dynamic, source(tmp_path, [1, 2]), memory_budget=1000)
    assert decision.result is None and "budget" in decision.reason
    with pytest.raises(LocalMergeRefused, match="engine='local' cannot run this MERGE into db.d: .*budget"):
        merge_here_or_refuse(dynamic, source(tmp_path, [1, 2]), memory_budget=1000, engine="local")
    assert _walk(dynamic.path) == before
