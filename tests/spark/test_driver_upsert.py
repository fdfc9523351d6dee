"""Plain upserts of small local Parquet increments, written by the merge application itself (no Spark job).

The Spark session is handed to `run_merge` as a function that fails the test: a merge that takes the driver path
must never ask for it, and every source the driver leaves to Spark must ask for it before touching the table.
One test (marked spark) checks that the driver and Spark write the same table.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.errors import DuplicateKeyError, InvalidDataError
from airflow_paimon.merge import MergeClauseError, matched_update, not_matched_insert
from airflow_paimon.spark.merge import run_merge

from .reference import canonical, clause, merge_rows
from .test_merge import COLUMNS, SCHEMA, make_target, row, write_source

UPSERT = [clause("matched", "update", None, "*"), clause("not_matched", "insert", None, "*")]


class SparkWanted(Exception):
    """Raised by the session factory: the merge asked for Spark."""


def no_spark():
    raise SparkWanted()


def merge(cat, source, *, ident=1, spark=no_spark, **extra):
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": source, "commit_user": "test",
            "commit_identifier": ident}
    spec.update(extra)
    return run_merge(spark, spec)


def rows_of(cat, **kw):
    return cat.get_table("db.t").read(**kw).to_pylist()


def data_files(cat):
    return set(Path(cat.warehouse).rglob("data-*.parquet"))


def test_a_small_parquet_upsert_is_written_by_the_driver(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    before = rows_of(cat)
    source = [row(i, 1) for i in range(30, 50)]                     # 10 updates, 10 inserts
    r = merge(cat, write_source(tmp_path, source))
    assert r["status"] == "committed" and r["engine"] == "driver" and r["mode"] == "upsert"
    assert r["rows"] == {"inserted": 20, "updated": 0, "deleted": 0}
    assert r["target_rows_read"] == 0 and r["source"]["files"] == 1
    expected = merge_rows(before, source, ["id"], UPSERT, COLUMNS)
    assert canonical(rows_of(cat), ["id"]) == canonical(expected, ["id"])
    snap = cat.get_table("db.t").latest_snapshot()
    assert (snap.id, snap.commit_user, snap.commit_identifier) == (r["snapshot_id"], "test", 1)
    # A folder of files with other column case and a narrower key type: same rules as Spark (case-insensitive
    # names, lossless integer widening).
    folder = tmp_path / "day2"
    folder.mkdir()
    upper = pa.schema([("ID", pa.int32())] + [pa.field(f.name.upper(), f.type) for f in SCHEMA][1:])
    day2 = [row(i, 2) for i in range(45, 55)]
    for k, chunk in enumerate((day2[:4], day2[4:])):
        pq.write_table(pa.Table.from_pylist([{k.upper(): v for k, v in x.items()} for x in chunk], schema=upper),
                       folder / f"part-{k}.parquet")
    (folder / "_SUCCESS").write_text("")
    r2 = merge(cat, str(folder), ident=2)
    assert r2["engine"] == "driver" and r2["source"]["files"] == 2
    expected = merge_rows(expected, day2, ["id"], UPSERT, COLUMNS)
    assert canonical(rows_of(cat), ["id"]) == canonical(expected, ["id"])


def test_a_partitioned_target(warehouse, tmp_path):
    cat = warehouse
    make_target(cat, partitioned=True)
    before = rows_of(cat)
    source = [row(i, 1) for i in range(20, 60)]
    r = merge(cat, write_source(tmp_path, source))
    assert r["engine"] == "driver"
    assert canonical(rows_of(cat), ["id", "dt"]) == canonical(merge_rows(before, source, ["id", "dt"], UPSERT,
                                                                         COLUMNS), ["id", "dt"])


def test_several_rows_for_one_key_fail_before_any_file_is_written(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    before, files = rows_of(cat), data_files(cat)
    with pytest.raises(DuplicateKeyError, match="id=7"):
        merge(cat, write_source(tmp_path, [row(i, 1) for i in range(5, 15)] + [row(7, 2)]))
    assert data_files(cat) == files and len(cat.get_table("db.t").snapshots()) == 1
    assert canonical(rows_of(cat), ["id"]) == canonical(before, ["id"])


def test_a_null_key_or_missing_column_changes_nothing(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    before = rows_of(cat)
    with pytest.raises(InvalidDataError, match="'id'"):
        merge(cat, write_source(tmp_path, [dict(row(1, 1), id=None)], "nullkey.parquet"))
    slim = write_source(tmp_path, [{"id": 1, "name": "x"}], "slim.parquet",
                        pa.schema([("id", pa.int64()), ("name", pa.string())]))
    with pytest.raises(MergeClauseError, match="no column"):
        merge(cat, slim)
    assert len(cat.get_table("db.t").snapshots()) == 1
    assert canonical(rows_of(cat), ["id"]) == canonical(before, ["id"])


# with deletion vectors, the live row of a key that an older version reaches is written again above level 0
VECTORS = pytest.mark.parametrize("vectors", [{}, {"deletion-vectors.enabled": "true"}], ids=["plain", "vectors"])


@VECTORS
def test_sequence_field_keeps_newer_values_when_an_older_day_comes_later(warehouse, tmp_path, vectors):
    cat = warehouse
    make_target(cat, options={"sequence.field": "updated_at", **vectors}, rows=[row(i) for i in range(20)])
    newer = [row(i, 3) for i in range(0, 10)]
    older = [row(i, 2) for i in range(5, 15)]
    merge(cat, write_source(tmp_path, newer, "newer.parquet"), ident=1)
    after_newer = rows_of(cat)
    r = merge(cat, write_source(tmp_path, older, "older.parquet"), ident=2)
    assert r["engine"] == "driver"
    expected = merge_rows(after_newer, older, ["id"], UPSERT, COLUMNS, seq_fields=["updated_at"])
    assert canonical(rows_of(cat), ["id"]) == canonical(expected, ["id"])
    assert {x["id"]: x["name"] for x in rows_of(cat)}[5] == "n5-v3"


@VECTORS
def test_a_null_sequence_value_in_the_increment_never_replaces_a_value(warehouse, tmp_path, vectors):
    cat = warehouse
    make_target(cat, options={"sequence.field": "updated_at", **vectors}, rows=[row(i) for i in range(6)])
    before = rows_of(cat)
    source = [dict(row(i, 1), updated_at=None) for i in range(3, 9)]      # 3 keys held, 3 new
    r = merge(cat, write_source(tmp_path, source))
    assert r["engine"] == "driver"
    expected = merge_rows(before, source, ["id"], UPSERT, COLUMNS, seq_fields=["updated_at"])
    assert canonical(rows_of(cat), ["id"]) == canonical(expected, ["id"])
    assert {x["id"]: x["name"] for x in rows_of(cat)} == {0: "n0-v0", 1: "n1-v0", 2: "n2-v0", 3: "n3-v0",
                                                         4: "n4-v0", 5: "n5-v0", 6: "n6-v1", 7: "n7-v1", 8: "n8-v1"}


KINDS = pa.schema([("id", pa.int64()), ("name", pa.string()), ("op", pa.string())])


@pytest.mark.parametrize("ignore_delete", [False, True], ids=["deletes", "ignore-delete"])
def test_rowkind_field_rows_delete_and_update_through_the_driver(warehouse, tmp_path, ignore_delete):
    cat = warehouse
    options = {"bucket": "2", "rowkind.field": "op", "ignore-delete": str(ignore_delete).lower()}
    t = cat.create_table("db.t", KINDS, primary_keys=["id"], options=options)
    t.write(pa.Table.from_pylist([{"id": i, "name": "v0", "op": "+I"} for i in range(4)], schema=KINDS))
    source = [{"id": 0, "name": "v1", "op": "-D"}, {"id": 1, "name": "v1", "op": "+U"},
              {"id": 2, "name": "v1", "op": "-U"}, {"id": 9, "name": "v1", "op": "+I"}]
    path = tmp_path / "kinds.parquet"
    pq.write_table(pa.Table.from_pylist(source, schema=KINDS), path)
    r = merge(cat, str(path))
    assert r["engine"] == "driver"
    got = {x["id"]: x["name"] for x in rows_of(cat)}
    if ignore_delete:
        assert r["rows"] == {"inserted": 1, "updated": 1, "deleted": 0}
        assert got == {0: "v0", 1: "v1", 2: "v0", 3: "v0", 9: "v1"}
    else:
        assert r["rows"] == {"inserted": 1, "updated": 1, "deleted": 2}
        assert got == {1: "v1", 3: "v0", 9: "v1"}


def test_a_retry_does_nothing_and_reapply_merges_again(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    source = write_source(tmp_path, [row(i, 1) for i in range(35, 45)])
    first = merge(cat, source, ident=42)
    again = merge(cat, source, ident=42)
    assert again["status"] == "already_committed" and again["snapshot_id"] == first["snapshot_id"]
    re = merge(cat, source, ident=42, reapply=True, reapply_token="manual-1")
    assert re["status"] == "committed" and re["engine"] == "driver" and re["snapshot_id"] == first["snapshot_id"] + 1


def test_an_empty_folder_is_an_empty_increment(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    (tmp_path / "empty-day").mkdir()
    r = merge(cat, str(tmp_path / "empty-day"))
    assert r["status"] == "no_changes" and r["engine"] == "driver" and r["source"]["files"] == 0
    assert len(cat.get_table("db.t").snapshots()) == 1


def _nested(tmp_path):
    (tmp_path / "nested" / "dt=2026-11-01").mkdir(parents=True)
    write_source(tmp_path / "nested" / "dt=2026-11-01", [row(1, 1)], "p.parquet")
    return str(tmp_path / "nested")


def _mixed(tmp_path):
    (tmp_path / "mixed").mkdir()
    write_source(tmp_path / "mixed", [row(1, 1)], "a.parquet")
    write_source(tmp_path / "mixed", [{"id": 2, "name": "x"}], "b.parquet",
                 pa.schema([("id", pa.int64()), ("name", pa.string())]))
    return str(tmp_path / "mixed")


def _float32(tmp_path):
    schema = pa.schema([pa.field("amount", pa.float32()) if f.name == "amount" else f for f in SCHEMA])
    return write_source(tmp_path, [row(1, 1)], "f32.parquet", schema)


LEFT_TO_SPARK = {
    "csv": lambda p: ({"path": write_source(p, [row(1, 1)]), "format": "csv"}, {}),
    "sql": lambda p: ("SELECT 1 AS id", {"source_format": "sql"}),
    "paimon table": lambda p: ("db.t", {"source_format": "paimon"}),
    "object store": lambda p: ("s3://bucket/increment/", {}),
    "reader options": lambda p: (write_source(p, [row(1, 1)]), {"source_options": {"mergeSchema": "true"}}),
    "partition folders": lambda p: (_nested(p), {}),
    "files with different schemas": lambda p: (_mixed(p), {}),
    "a cast Spark does its own way": lambda p: (_float32(p), {}),
    "bigger than driver_bytes": lambda p: (write_source(p, [row(1, 1)]), {"driver_bytes": 100}),
    "driver path off": lambda p: (write_source(p, [row(1, 1)]), {"driver_bytes": 0}),
    "explicit task count": lambda p: (write_source(p, [row(1, 1)]), {"num_tasks": 2}),
    "conditional clauses": lambda p: (write_source(p, [row(1, 1)]), {"clauses": [
        matched_update(set="*", condition="s.amount > t.amount").to_dict(), not_matched_insert().to_dict()]}),
}


@pytest.mark.parametrize("case", list(LEFT_TO_SPARK))
def test_what_the_driver_leaves_to_spark(warehouse, tmp_path, case):
    cat = warehouse
    make_target(cat)
    source, extra = LEFT_TO_SPARK[case](tmp_path)
    with pytest.raises(SparkWanted):
        merge(cat, source, **extra)
    assert len(cat.get_table("db.t").snapshots()) == 1


@pytest.mark.spark
def test_the_driver_and_spark_write_the_same_table(spark, tmp_path):
    from airflow_paimon.format import Catalog

    source = write_source(tmp_path, [row(i, 1) for i in range(20, 70)])
    layouts = []
    for name, extra in (("driver", {}), ("spark", {"driver_bytes": 0})):
        cat = Catalog(str(tmp_path / name))
        cat.create_database("db")
        make_target(cat, bucket=4)
        r = merge(cat, source, spark=spark, **extra)
        assert r["engine"] == name and r["status"] == "committed"
        t = cat.get_table("db.t")
        files = sorted((e.bucket, e.file.level, e.file.row_count, e.file.min_sequence_number,
                        e.file.max_sequence_number) for e in t.file_entries(t.latest_snapshot()))
        layouts.append((canonical(t.read().to_pylist(), ["id"]), files, r["rows"]))
    assert layouts[0] == layouts[1]


@pytest.mark.spark
def test_spark_keeps_newer_values_in_a_deletion_vector_table_with_a_sequence_field(spark, tmp_path):
    """The Spark tasks' deletion-vector writer merges by the sequence field as the driver's does: an older day
    arriving later leaves the newer rows live, one row per key for a reader that does not merge."""
    from airflow_paimon.format import Catalog

    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    make_target(cat, options={"sequence.field": "updated_at", "deletion-vectors.enabled": "true"},
                rows=[row(i) for i in range(20)])
    merge(cat, write_source(tmp_path, [row(i, 3) for i in range(10)], "newer.parquet"), spark=spark,
          driver_bytes=0)
    after_newer = rows_of(cat)
    older = [row(i, 2) for i in range(5, 15)]
    r = merge(cat, write_source(tmp_path, older, "older.parquet"), ident=2, spark=spark, driver_bytes=0)
    assert r["engine"] == "spark" and r["status"] == "committed"
    expected = merge_rows(after_newer, older, ["id"], UPSERT, COLUMNS, seq_fields=["updated_at"])
    assert canonical(rows_of(cat), ["id"]) == canonical(expected, ["id"])
    assert {x["id"]: x["name"] for x in rows_of(cat)}[5] == "n5-v3"
