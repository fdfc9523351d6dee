"""MERGE on real Spark (local[2]) against a plain Python oracle of the same MERGE.

Every test compares the merged table, read back with the format library, to `reference.merge_rows`, and checks
what the merge read from the target (a plain upsert reads nothing; other merges read only the columns and
buckets they need).
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from airflow_paimon.merge import (
    MergeClauseError,
    matched_delete,
    matched_update,
    not_matched_by_source_delete,
    not_matched_by_source_update,
    not_matched_insert,
)
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.spark.tables import DuplicateKeyError, read_table_df

from .reference import canonical, clause, merge_rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([
    ("id", pa.int64()), ("dt", pa.string()), ("name", pa.string()), ("amount", pa.float64()),
    ("status", pa.string()), ("updated_at", pa.timestamp("us")),
])
COLUMNS = SCHEMA.names
T0 = dt.datetime(2026, 11, 1)


def row(i: int, version: int = 0, dt_: str | None = None, status: str | None = None, hours: int = 0) -> dict:
    return {"id": i, "dt": dt_ or f"2026-11-{1 + i % 3:02d}", "name": f"n{i}-v{version}",
            "amount": float(i * 10 + version), "status": status or ("open" if i % 4 else "closed"),
            "updated_at": T0 + dt.timedelta(hours=version * 24 + hours, seconds=i)}


def make_target(cat, name="db.t", partitioned=False, bucket=3, options=None, rows=None):
    pk = ["id", "dt"] if partitioned else ["id"]
    opts = {"bucket": str(bucket)}
    opts.update(options or {})
    t = cat.create_table(name, SCHEMA, primary_keys=pk, partition_keys=["dt"] if partitioned else [], options=opts)
    rows = rows if rows is not None else [row(i) for i in range(40)]
    t.write(pa.Table.from_pylist(rows, schema=SCHEMA))
    return cat.get_table(name)


def write_source(tmp_path, rows, name="src.parquet", schema=SCHEMA):
    path = tmp_path / name
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return str(path)


_PATH = {"single_task_bytes": None}


@pytest.fixture(params=["small-source", "shuffled-source"])
def both_paths(request):
    """Run the test through the small-source path (driver collects and broadcasts the increment) and through
    the shuffled path (the increment is shuffled by bucket) of the merge."""
    _PATH["single_task_bytes"] = None if request.param == "small-source" else 0
    yield request.param
    _PATH["single_task_bytes"] = None


def merge(spark, cat, source, *, target="db.t", clauses=None, on=None, ident=1, **extra):
    # These tests exercise the Spark paths; test_driver_upsert.py covers upserts written by the driver.
    spec = {"target": target, "warehouse": cat.warehouse, "source": source, "commit_user": "test",
            "commit_identifier": ident, "driver_bytes": 0}
    if _PATH["single_task_bytes"] is not None:
        spec["single_task_bytes"] = _PATH["single_task_bytes"]
    if clauses is not None:
        spec["clauses"] = [c.to_dict() for c in clauses]
    if on is not None:
        spec["on"] = on
    spec.update(extra)
    json.dumps(spec)  # the spec must travel as JSON
    return run_merge(spark, spec)


def table_rows(cat, name="db.t", **kw):
    return cat.get_table(name).read(**kw).to_pylist()


def check(cat, expected, keys=("id", "dt"), name="db.t"):
    assert canonical(table_rows(cat, name), keys) == canonical(expected, keys)


# ---------------------------------------------------------------------------------------------------------


@pytest.fixture()
def target(warehouse):
    make_target(warehouse)
    return warehouse


@pytest.mark.parametrize("single_task", [True, False], ids=["one-task", "shuffled-by-bucket"])
def test_plain_upsert_reads_no_target_data(spark, target, tmp_path, single_task):
    cat = target
    before = table_rows(cat)
    source = [row(i, 1) for i in range(30, 50)]          # 10 updates, 10 inserts
    r = merge(spark, cat, write_source(tmp_path, source), single_task_bytes=(32 << 20) if single_task else 0)
    assert r["status"] == "committed" and r["mode"] == "upsert" and r["single_task"] is single_task
    assert r["engine"] == "spark"
    assert r["target_rows_read"] == 0 and r["target_splits_read"] == 0
    expected = merge_rows(before, source, ["id"], [clause("matched", "update", None, "*"),
                                                    clause("not_matched", "insert", None, "*")], COLUMNS)
    check(cat, expected)
    snap = cat.get_table("db.t").latest_snapshot()
    assert snap.id == r["snapshot_id"] and snap.commit_user == "test" and snap.commit_identifier == 1
    # New files are level-0 files of the buckets, sequence numbers above the history's.
    assert read_table_df(spark, cat.get_table("db.t")).count() == len(expected)


def test_conditional_merge_every_matched_and_not_matched_clause(spark, target, tmp_path, both_paths):
    cat = target
    before = table_rows(cat)
    source = [row(i, 1, status="gone" if i % 5 == 0 else None) for i in range(20, 60)]
    clauses = [
        matched_delete(condition="s.status = 'gone'"),
        matched_update(set={"amount": "t.amount + s.amount", "name": "upper(s.name)"}, condition="s.id % 2 = 0"),
        matched_update(set="*"),
        not_matched_insert(values={"id": "s.id", "dt": "s.dt", "name": "concat('new-', s.name)",
                                   "amount": "s.amount * 2"}, condition="s.id < 55"),
    ]
    r = merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    assert r["status"] == "committed" and r["mode"] == "merge"
    ref = [
        clause("matched", "delete", lambda s, t: s["status"] == "gone"),
        clause("matched", "update", lambda s, t: s["id"] % 2 == 0,
               {"amount": lambda s, t: t["amount"] + s["amount"], "name": lambda s, t: s["name"].upper()}),
        clause("matched", "update", None, "*"),
        clause("not_matched", "insert", lambda s, t: s["id"] < 55,
               {"id": lambda s, t: s["id"], "dt": lambda s, t: s["dt"], "name": lambda s, t: "new-" + s["name"],
                "amount": lambda s, t: s["amount"] * 2}),
    ]
    check(cat, merge_rows(before, source, ["id"], ref, COLUMNS))
    # Every bucket holds some source key, so each is read once; no other target data.
    assert r["target_splits_read"] <= 3
    assert r["target_rows_read"] == len(before)


def test_only_the_buckets_and_partitions_the_source_touches_are_read(spark, warehouse, tmp_path, both_paths):
    cat = warehouse
    make_target(cat, partitioned=True, bucket=4, rows=[row(i) for i in range(300)])
    before = table_rows(cat)
    source = [row(i, 1) for i in (3, 6, 9, 303)]          # all in partition 2026-11-01, at most 4 buckets
    assert {s["dt"] for s in source} == {"2026-11-01"}
    clauses = [matched_update(set="*", condition="s.amount > t.amount"), not_matched_insert()]
    r = merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    ref = [clause("matched", "update", lambda s, t: s["amount"] > t["amount"], "*"),
           clause("not_matched", "insert", None, "*")]
    check(cat, merge_rows(before, source, ["id", "dt"], ref, COLUMNS))
    table = cat.get_table("db.t")
    touched = {b for b in range(4)}  # upper bound: the partition's buckets
    assert r["target_splits_read"] <= len(touched)
    in_partition = sum(1 for x in before if x["dt"] == "2026-11-01")
    assert 0 < r["target_rows_read"] <= in_partition < len(before)
    # Columns: keys, then what the condition reads (set='*' needs no other target column).
    assert set(r["target_columns_read"]) == {"id", "dt", "amount"}
    assert table.latest_snapshot().id == r["snapshot_id"]


def test_not_matched_by_source_reads_only_the_columns_it_needs(spark, target, tmp_path, both_paths):
    cat = target
    before = table_rows(cat)
    source = [row(i, 1) for i in range(0, 10)]
    clauses = [matched_update(set="*"), not_matched_by_source_delete(condition="t.status = 'closed'"),
               not_matched_by_source_update(set={"status": "'stale'"}, condition="t.amount > 300")]
    r = merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    ref = [clause("matched", "update", None, "*"),
           clause("not_matched_by_source", "delete", lambda s, t: t["status"] == "closed"),
           clause("not_matched_by_source", "update", lambda s, t: t["amount"] > 300, {"status": lambda s, t: "stale"})]
    check(cat, merge_rows(before, source, ["id"], ref, COLUMNS))
    # The partial NOT MATCHED BY SOURCE update keeps the other columns, so here every column is read...
    assert r["target_rows_read"] == len(before)
    # ...while a delete-only clause list reads the key and the condition's column only.
    source2 = [row(i, 2) for i in range(0, 5)]
    before2 = table_rows(cat)
    r2 = merge(spark, cat, write_source(tmp_path, source2, "src2.parquet"),
               clauses=[not_matched_by_source_delete(condition="t.amount < 100")], ident=2)
    assert r2["target_columns_read"] == ["id", "amount"]
    check(cat, merge_rows(before2, source2, ["id"],
                          [clause("not_matched_by_source", "delete", lambda s, t: t["amount"] < 100)], COLUMNS))


def test_partitioned_target_with_deletes_and_inserts(spark, warehouse, tmp_path, both_paths):
    cat = warehouse
    make_target(cat, partitioned=True, bucket=2, rows=[row(i) for i in range(60)])
    before = table_rows(cat)
    source = [row(i, 1, status="gone" if i % 3 == 0 else "open") for i in range(50, 80)]
    clauses = [matched_delete(condition="s.status = 'gone'"), matched_update(set="*"),
               not_matched_insert(condition="s.status <> 'gone'")]
    r = merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    ref = [clause("matched", "delete", lambda s, t: s["status"] == "gone"), clause("matched", "update", None, "*"),
           clause("not_matched", "insert", lambda s, t: s["status"] != "gone", "*")]
    expected = merge_rows(before, source, ["id", "dt"], ref, COLUMNS)
    check(cat, expected)
    assert r["rows"]["deleted"] == sum(1 for s in source if s["status"] == "gone" and s["id"] < 60)
    # Deleting keys writes -D rows; readers of the previous snapshot still see the rows.
    assert canonical(table_rows(cat, snapshot_id=r["snapshot_id"] - 1), ["id", "dt"]) == canonical(before, ["id", "dt"])


def test_sequence_field_older_increment_cannot_overwrite_newer_values(spark, warehouse, tmp_path, both_paths):
    cat = warehouse
    make_target(cat, options={"sequence.field": "updated_at"}, rows=[row(i) for i in range(20)])
    newer = [row(i, 3) for i in range(0, 10)]             # day 3
    older = [row(i, 2, status="gone" if i % 2 else None) for i in range(5, 15)]  # day 2, merged afterwards
    # Plain upsert: merge-on-read orders by updated_at.
    merge(spark, cat, write_source(tmp_path, newer, "newer.parquet"), ident=1)
    after_newer = table_rows(cat)
    merge(spark, cat, write_source(tmp_path, older, "older.parquet"), ident=2)
    upsert = [clause("matched", "update", None, "*"), clause("not_matched", "insert", None, "*")]
    expected = merge_rows(after_newer, older, ["id"], upsert, COLUMNS, seq_fields=["updated_at"])
    check(cat, expected)
    assert {r["id"]: r["name"] for r in table_rows(cat)}[5] == "n5-v3"     # the newer value stayed
    # A conditional merge of the older increment: matched clauses skip older source rows.
    before = table_rows(cat)
    clauses = [matched_delete(condition="s.status = 'gone'"), matched_update(set={"status": "'touched'"}),
               not_matched_insert()]
    r = merge(spark, cat, write_source(tmp_path, older, "older.parquet"), clauses=clauses, ident=3)
    assert r["sequence_guard"] == ["updated_at"]
    ref = [clause("matched", "delete", lambda s, t: s["status"] == "gone"),
           clause("matched", "update", None, {"status": lambda s, t: "touched"}),
           clause("not_matched", "insert", None, "*")]
    check(cat, merge_rows(before, older, ["id"], ref, COLUMNS, seq_fields=["updated_at"]))
    rows = {r["id"]: r for r in table_rows(cat)}
    assert rows[5]["name"] == "n5-v3" and rows[5]["status"] != "touched"   # newer row untouched
    assert rows[12]["status"] == "touched"                                 # older target row updated
    assert 11 not in rows                                                  # older target row deleted


@pytest.mark.parametrize("conditional", [False, True], ids=["upsert", "conditional"])
def test_several_source_rows_for_one_key_fail_and_change_nothing(spark, target, tmp_path, both_paths, conditional):
    cat = target
    before = table_rows(cat)
    snaps = [s.id for s in cat.get_table("db.t").snapshots()]
    source = [row(i, 1) for i in range(5, 15)] + [row(7, 2)]
    clauses = [matched_update(set="*", condition="s.amount > 0"), not_matched_insert()] if conditional else None
    files = {p for p in (tmp_path / "wh").rglob("data-*.parquet")}
    with pytest.raises(DuplicateKeyError, match="id=7"):
        merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    assert [s.id for s in cat.get_table("db.t").snapshots()] == snaps
    check(cat, before)
    # Found before any file was written (one task, or a shuffle before the writing tasks).
    assert {p for p in (tmp_path / "wh").rglob("data-*.parquet")} == files


def test_retry_is_idempotent_and_reapply_merges_again(spark, target, tmp_path):
    cat = target
    source = write_source(tmp_path, [row(i, 1) for i in range(35, 45)])
    first = merge(spark, cat, source, ident=42)
    after = table_rows(cat)
    again = merge(spark, cat, source, ident=42)
    assert again["status"] == "already_committed" and again["snapshot_id"] == first["snapshot_id"]
    assert cat.get_table("db.t").latest_snapshot().id == first["snapshot_id"]
    check(cat, after)
    re = merge(spark, cat, source, ident=42, reapply=True, reapply_token="manual-1")
    assert re["status"] == "committed" and re["snapshot_id"] == first["snapshot_id"] + 1
    assert re["commit_identifier"] != 42
    re2 = merge(spark, cat, source, ident=42, reapply=True, reapply_token="manual-1")
    assert re2["status"] == "already_committed" and re2["snapshot_id"] == re["snapshot_id"]
    check(cat, after)  # an upsert of the same rows leaves the same table


def test_bad_clauses_fail_before_anything_runs(spark, target, tmp_path):
    cat = target
    source = write_source(tmp_path, [row(1, 1)])
    snaps = len(cat.get_table("db.t").snapshots())
    with pytest.raises(MergeClauseError, match="primary key"):
        merge(spark, cat, source, clauses=[matched_update(set={"id": "s.id + 1"})])
    with pytest.raises(MergeClauseError, match="never apply"):
        merge(spark, cat, source, clauses=[matched_update(), matched_delete(condition="s.id = 1")])
    with pytest.raises(MergeClauseError, match="primary-key column"):
        merge(spark, cat, source, on=["name"])
    slim = write_source(tmp_path, [{"id": 1, "name": "x"}], "slim.parquet",
                        pa.schema([("id", pa.int64()), ("name", pa.string())]))
    with pytest.raises(MergeClauseError, match="no column"):
        merge(spark, cat, slim)
    assert len(cat.get_table("db.t").snapshots()) == snaps


def test_partial_source_with_explicit_assignments(spark, target, tmp_path):
    cat = target
    before = table_rows(cat)
    schema = pa.schema([("id", pa.int32()), ("amount", pa.float32())])   # narrower types are cast
    src = [{"id": i, "amount": float(i)} for i in range(30, 45)]
    path = write_source(tmp_path, src, "partial.parquet", schema)
    clauses = [matched_update(set={"amount": "s.amount"}),
               not_matched_insert(values={"id": "s.id", "dt": "'2026-12-01'", "amount": "s.amount"})]
    merge(spark, cat, path, clauses=clauses)
    ref = [clause("matched", "update", None, {"amount": lambda s, t: s["amount"]}),
           clause("not_matched", "insert", None, {"id": lambda s, t: s["id"], "dt": lambda s, t: "2026-12-01",
                                                   "amount": lambda s, t: s["amount"]})]
    check(cat, merge_rows(before, src, ["id"], ref, COLUMNS), keys=("id",))


def test_csv_json_and_sql_sources(spark, target, tmp_path):
    cat = target
    before = table_rows(cat)
    rows = [row(i, 1) for i in range(38, 42)]
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    pacsv.write_csv(pa.Table.from_pylist(rows, schema=SCHEMA), csv_dir / "part-0.csv")
    r = merge(spark, cat, str(csv_dir), source_format="csv", ident=1)
    assert r["status"] == "committed"
    upsert = [clause("matched", "update", None, "*"), clause("not_matched", "insert", None, "*")]
    expected = merge_rows(before, rows, ["id"], upsert, COLUMNS)
    check(cat, expected)
    rows2 = [row(i, 2) for i in range(41, 44)]
    json_dir = tmp_path / "json"
    json_dir.mkdir()
    (json_dir / "part-0.json").write_text("\n".join(json.dumps(r, default=str) for r in rows2))
    merge(spark, cat, {"path": str(json_dir), "format": "json"}, ident=2)
    expected = merge_rows(expected, rows2, ["id"], upsert, COLUMNS)
    check(cat, expected)
    sql = ("SELECT id, dt, name, amount * 3 AS amount, status, updated_at FROM parquet.`"
           + write_source(tmp_path, [row(i, 3) for i in range(0, 3)], "q.parquet") + "`")
    merge(spark, cat, sql, source_format="sql", ident=3,
          clauses=[matched_update(set={"amount": "s.amount"})])
    expected = merge_rows(expected, [dict(row(i, 3), amount=row(i, 3)["amount"] * 3) for i in range(3)], ["id"],
                          [clause("matched", "update", None, {"amount": lambda s, t: s["amount"]})], COLUMNS)
    check(cat, expected)


def test_source_table_at_a_tag_and_changes_between_tags(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat, rows=[row(i) for i in range(20)])
    src = cat.create_table("db.src", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    src.write(pa.Table.from_pylist([row(i) for i in range(20)], schema=SCHEMA))
    src.create_tag("a")
    src.write(pa.Table.from_pylist([row(i, 5) for i in range(15, 25)], schema=SCHEMA))
    src.delete(pa.table({"id": pa.array([1, 2], pa.int64())}))
    src.create_tag("b")
    src.write(pa.Table.from_pylist([row(99, 9)], schema=SCHEMA))       # after b: not part of the merge
    r = merge(spark, cat, {"table": "db.src", "from_tag": "a", "tag": "b"}, source_format="paimon")
    assert r["source"]["kind"] == "changes" and r["mode"] == "merge"
    # The target now equals the source at b (it equalled the source at a).
    check(cat, cat.get_table("db.src").read(tag="b").to_pylist(), keys=("id",))
    assert r["rows"] == {"inserted": 5, "updated": 5, "deleted": 2}
    # The rows of a table at a tag, upserted.
    r2 = merge(spark, cat, "db.src", source_format="paimon", ident=2)
    assert r2["mode"] == "upsert"
    assert 99 in {x["id"] for x in table_rows(cat)}


def test_source_table_as_of_an_expired_time_needs_closest_tag(spark, warehouse):
    """A source read by time whose snapshot expired is an error naming the closest tag; `closest_tag` reads that
    tag and the merge's source description says so."""
    from airflow_paimon.format import SnapshotExpiredError

    cat = warehouse
    make_target(cat, rows=[row(i) for i in range(5)])
    src = cat.create_table("db.src", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    first = src.write(pa.Table.from_pylist([row(i, 1) for i in range(10)], schema=SCHEMA))
    src.create_tag("a")
    src.write(pa.Table.from_pylist([row(i, 2) for i in range(10)], schema=SCHEMA))
    src.write(pa.Table.from_pylist([row(i, 3) for i in range(10)], schema=SCHEMA))
    src.maintenance.expire_snapshots(retain_min=1, older_than="2100-01-01", max_deletes=10)
    when = first.time_millis + 1
    before = table_rows(cat)
    with pytest.raises(SnapshotExpiredError, match="closest tag is 'a'"):
        merge(spark, cat, {"table": "db.src", "as_of": when}, source_format="paimon")
    check(cat, before)
    r = merge(spark, cat, {"table": "db.src", "as_of": when, "closest_tag": True}, source_format="paimon")
    assert r["source"]["time_travel"] == "closest-tag" and r["source"]["snapshot_id"] == first.id
    check(cat, [row(i, 1) for i in range(10)], keys=("id",))


def test_an_empty_increment_folder_changes_nothing_and_task_errors_stay_clear(spark, target, tmp_path):
    from airflow_paimon.format.errors import InvalidDataError

    cat = target
    before = table_rows(cat)
    (tmp_path / "empty-day").mkdir()
    r = merge(spark, cat, str(tmp_path / "empty-day"))
    assert r["status"] == "no_changes" and r["source"].get("empty")
    check(cat, before)
    # An error raised inside a Spark task (a null key) arrives as the library's own error type.
    bad = write_source(tmp_path, [dict(row(1, 1), id=None)], "nullkey.parquet")
    with pytest.raises(InvalidDataError, match="primary-key column 'id' is null"):
        merge(spark, cat, bad, ident=2)
    check(cat, before)
