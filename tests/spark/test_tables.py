"""The Spark building blocks: reading a table (any snapshot, tag, time; projected, pruned) and writing changes."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.spark.tables import DuplicateKeyError, diff_rows, read_changes_df, read_table_df, write_changes
from airflow_paimon.spark.tables.changes import CHANGE_COLUMN

from .reference import canonical
from .test_merge import SCHEMA, make_target, row

pytestmark = pytest.mark.spark


def _rows(df) -> list[dict]:
    return [r.asDict() for r in df.collect()]


def test_read_any_snapshot_tag_or_time_projected_and_pruned(spark, warehouse):
    cat = warehouse
    t = make_target(cat, partitioned=True, bucket=3, rows=[row(i) for i in range(50)])
    t.create_tag("first")
    first_time = t.latest_snapshot().time_millis
    t.write(pa.Table.from_pylist([row(i, 1) for i in range(40, 70)], schema=SCHEMA))
    t.delete(pa.table({"id": pa.array([41, 42], pa.int64()), "dt": [row(41)["dt"], row(42)["dt"]]}))
    keys = ["id", "dt"]
    assert canonical(_rows(read_table_df(spark, t)), keys) == canonical(t.read().to_pylist(), keys)
    assert canonical(_rows(read_table_df(spark, t, tag="first")), keys) == \
        canonical(t.read(tag="first").to_pylist(), keys)
    assert canonical(_rows(read_table_df(spark, t, snapshot_id=2)), keys) == \
        canonical(t.read(snapshot_id=2).to_pylist(), keys)
    at = dt.datetime.fromtimestamp(first_time / 1000, dt.timezone.utc)
    assert len(_rows(read_table_df(spark, t, as_of=at))) == 50
    # Projection and partition pruning.
    df = read_table_df(spark, t, columns=["id", "amount"], partitions=[{"dt": "2026-11-02"}])
    assert df.columns == ["id", "amount"]
    expected = t.read(columns=["id", "amount"], filter=ds.field("dt") == "2026-11-02").to_pylist()
    assert canonical(_rows(df), ["id"]) == canonical(expected, ["id"])
    # A filter expression prunes files by key range and filters rows.
    df = read_table_df(spark, t, filter=ds.field("id") >= 60)
    assert sorted(r["id"] for r in _rows(df)) == list(range(60, 70))
    # Types survive the trip (timestamps as TIMESTAMP_NTZ).
    assert dict(read_table_df(spark, t).dtypes)["updated_at"] == "timestamp_ntz"


def test_changes_between_snapshots_read_only_changed_buckets(spark, warehouse):
    cat = warehouse
    t = make_target(cat, bucket=4, rows=[row(i) for i in range(40)])
    a = t.latest_snapshot()
    t.write(pa.Table.from_pylist([row(3, 1), row(100, 1)], schema=SCHEMA))
    t.delete(pa.table({"id": pa.array([5], pa.int64())}))
    t.write(pa.Table.from_pylist([row(7)], schema=SCHEMA))             # rewritten, same values: no change
    b = t.latest_snapshot()
    changes = {r["id"]: r["_change"] for r in _rows(read_changes_df(spark, t, a, b))}
    assert changes == {3: "+U", 100: "+I", 5: "-D"}
    assert _rows(read_changes_df(spark, t, b, b)) == []
    # diff_rows on plain Arrow tables.
    before = pa.table({"k": [1, 2, 3], "v": ["a", None, "c"]})
    after = pa.table({"k": [2, 3, 4], "v": [None, "C", "d"]})
    d = diff_rows(before, after, ["k"]).to_pylist()
    assert sorted((r["k"], r["_change"], r["v"]) for r in d) == [(1, "-D", "a"), (3, "+U", "C"), (4, "+I", "d")]


def test_write_changes_buckets_like_the_library_and_commits_once(spark, warehouse):
    cat = warehouse
    t = make_target(cat, partitioned=True, bucket=5, rows=[row(i) for i in range(30)])
    base = t.latest_snapshot()
    changes = [dict(row(i, 1), _VALUE_KIND="+U") for i in range(0, 20)]
    changes += [dict(row(i, 1), _VALUE_KIND="-D") for i in range(20, 25)]
    changes += [dict(row(i, 1), _VALUE_KIND="+I") for i in range(100, 110)]
    df = spark.createDataFrame(pa.Table.from_pylist(changes).to_pandas())
    res = write_changes(spark, t, df, commit_user="w", commit_identifier=9)
    assert res.snapshot.id == base.id + 1 and res.rows == {"inserted": 10, "updated": 20, "deleted": 5}
    t = cat.get_table("db.t")
    expected = {(r["id"], r["dt"]): r for r in (row(i) for i in range(30))}
    for c in changes:
        key = (c["id"], c["dt"])
        if c["_VALUE_KIND"] == "-D":
            expected.pop(key, None)
        else:
            expected[key] = {k: v for k, v in c.items() if k != "_VALUE_KIND"}
    assert canonical(t.read().to_pylist(), ["id", "dt"]) == canonical(list(expected.values()), ["id", "dt"])
    # Every new file holds only keys of its own bucket, by the library's bucket function.
    for e in t.file_entries(t.latest_snapshot()):
        if e.file.min_sequence_number < 30:
            continue
        path = t.data_file_path(t.partition_codec.from_bytes(e.partition), e.bucket, e.file)
        keys = pq.read_table(path, columns=["id"])
        assert set(bucket_ids(keys, 5).tolist()) == {e.bucket}
    # One commit; the same identifier again is found and nothing is written.
    again = write_changes(spark, t, df, commit_user="w", commit_identifier=9)
    assert again.already_committed and again.snapshot.id == res.snapshot.id


def test_write_changes_duplicates(spark, warehouse):
    cat = warehouse
    t = make_target(cat, options={"sequence.field": "updated_at"}, rows=[row(1)])
    rows = [row(5, 1), row(5, 3), row(5, 2)]
    df = spark.createDataFrame(pa.Table.from_pylist(rows, schema=SCHEMA).to_pandas())
    with pytest.raises(DuplicateKeyError, match="id=5"):
        write_changes(spark, t, df, kind_column=None)
    assert len(cat.get_table("db.t").snapshots()) == 1
    write_changes(spark, t, df, kind_column=None, duplicates="last")
    got = {r["id"]: r["name"] for r in cat.get_table("db.t").read().to_pylist()}
    assert got == {1: "n1-v0", 5: "n5-v3"}                                # highest sequence field wins


def test_write_changes_into_an_append_table(spark, warehouse):
    cat = warehouse
    t = cat.create_table("db.log", SCHEMA, partition_keys=["dt"])
    rows = [row(i) for i in range(25)]
    df = spark.createDataFrame(pa.Table.from_pylist(rows, schema=SCHEMA).to_pandas())
    res = write_changes(spark, t, df, kind_column=None)
    assert res.snapshot is not None
    got = cat.get_table("db.log").read().to_pylist()
    assert canonical(got, ["id"]) == canonical(rows, ["id"])
    assert len(cat.get_table("db.log").file_entries(res.snapshot)) == 3  # one file per partition
    assert json.loads(json.dumps(res.messages[0].to_dict()))
    assert np.all([e.bucket == 0 for e in cat.get_table("db.log").file_entries(res.snapshot)])


def test_write_changes_keeps_deletion_vectors_up_to_date(spark, warehouse):
    """A Spark write to a deletion-vector table leaves its rows above level 0 with the old versions marked, as the
    library's own writes do, so that reads need no merge."""
    t = warehouse.create_table("db.dv", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_keys=["id"],
                               options={"bucket": "2", "deletion-vectors.enabled": "true"})
    t.write(pa.table({"id": pa.array(range(10), pa.int64()), "v": ["a"] * 10}))
    before = t.latest_snapshot()
    df = spark.createDataFrame([(2, "s", "+U"), (3, "s", "-D"), (11, "s", "+I")],
                               "id long, v string, _VALUE_KIND string")
    write_changes(spark, t, df)
    expected = {i: "a" for i in range(10) if i != 3} | {2: "s", 11: "s"}
    assert dict(zip(*t.read().to_pydict().values())) == expected
    assert all(e.file.level > 0 for e in t.file_entries(t.latest_snapshot()))
    # The changes between the snapshots see the key only a vector deleted.
    changed = read_changes_df(spark, t, before, t.latest_snapshot()).collect()
    assert sorted((r["id"], r[CHANGE_COLUMN]) for r in changed) == [(2, "+U"), (3, "-D"), (11, "+I")]
