"""Table.changes: the change feed in Paimon's modes (delta, diff, changelog, auto) and Delta's columns."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.binary_row import deserialize_row
from airflow_paimon.format.changes import ChangeModeError
from airflow_paimon.format.errors import (
    InvalidOptionError,
    SnapshotExpiredError,
)

from .upkeep_helpers import tree_digest

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string()), ("seq", pa.int64())])


def rows(ids, dt="a", tag="v", seq=0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [f"{tag}{i}" for i in ids], "seq": [seq] * len(ids)},
                    schema=SCHEMA)


def make(catalog: Catalog, bucket: str = "2", **options: str):
    opts = {"bucket": bucket, **options}
    return catalog.create_table("db.t", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options=opts)


def feed(table, *args, **kwargs) -> list[tuple]:
    data = table.changes(*args, **kwargs).read_all()
    return [(r["_commit_version"], r["_change_type"], r["id"], r["dt"], r["v"]) for r in data.to_pylist()]


def test_delta_gives_every_write_with_its_kind_and_commit(catalog):
    t = make(catalog)
    t.write(pa.concat_tables([rows([1, 2, 3]), rows([4], dt="b")]))   # 1
    t.write(rows([1], tag="w"))                                          # 2
    t.write(rows([1], tag="x"))                                          # 3
    t.delete(pa.table({"id": [2], "dt": ["a"]}))                         # 4
    got = feed(t, 1, 4, mode="delta")
    assert sorted(got) == [(2, "insert", 1, "a", "w1"), (3, "insert", 1, "a", "x1"), (4, "delete", 2, "a", None)]
    reader = t.changes(0, mode="delta")
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["id", "dt", "v", "seq", "_change_type", "_commit_version", "_commit_timestamp"]
    full = reader.read_all()
    assert full.num_rows == 7
    snap = t.snapshot(2)
    at2 = full.filter(ds.field("_commit_version") == 2)
    assert at2.column("_commit_timestamp")[0].value == snap.time_millis


def test_delta_skips_compactions_and_projects_and_filters(catalog):
    t = make(catalog)
    t.write(rows([1, 2, 3, 4]))
    t.write(rows([2], tag="w"))
    assert t.maintenance.compact() is not None
    t.write(rows([3], tag="x"))
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "APPEND", "COMPACT", "APPEND"]
    got = t.changes(1, columns=["v"], filter=ds.field("id") >= 3, mode="delta").read_all()
    assert got.column_names == ["v", "_change_type", "_commit_version", "_commit_timestamp"]
    assert got.to_pylist()[0]["v"] == "x3" and got.num_rows == 1


def test_diff_gives_pre_and_post_images_and_deletes(catalog):
    t = make(catalog)
    t.write(pa.concat_tables([rows([1, 2, 3]), rows([7], dt="b")]))
    t.write(rows([1], tag="w"))
    t.write(rows([1], tag="x"))
    t.delete(pa.table({"id": [2], "dt": ["a"]}))
    t.write(rows([5]))
    t.write(rows([3]))   # same values as before: no change
    got = feed(t, 1, None, mode="diff")
    last = t.latest_snapshot().id
    assert sorted(got) == sorted([(last, "delete", 2, "a", "v2"), (last, "update_preimage", 1, "a", "v1"),
                                  (last, "update_postimage", 1, "a", "x1"), (last, "insert", 5, "a", "v5")])
    kinds = [k for _, k, *_ in got]
    assert kinds.index("update_preimage") + 1 == kinds.index("update_postimage")


def test_diff_reads_only_the_buckets_that_changed(catalog, tmp_path):
    """A bucket whose files both ends share is not read: removing its file does not disturb the diff."""
    t = make(catalog)
    t.write(pa.concat_tables([rows(range(20)), rows(range(5), dt="b")]))
    t.create_tag("before")
    t.write(rows([1], tag="new"))
    changed = {(e.partition, e.bucket) for e in t.file_entries(t.latest_snapshot())
               if e.file.min_sequence_number > 0 or e.file.max_sequence_number > 19}
    untouched = [e for e in t.file_entries(t.latest_snapshot()) if (e.partition, e.bucket) not in changed]
    assert untouched
    for e in untouched:
        os.remove(t.data_file_path(t.partition_codec.from_bytes(e.partition), e.bucket, e.file))
    got = feed(t, "before", None)      # auto between a tag and the latest snapshot: delta
    assert [g[1:] for g in got] == [("insert", 1, "a", "new1")]
    got = feed(t, "before", None, mode="diff")
    assert [g[1:] for g in got] == [("update_preimage", 1, "a", "v1"), ("update_postimage", 1, "a", "new1")]


def test_a_diff_read_stopped_early_leaves_no_queued_bucket_to_compute(monkeypatch):
    """The diff's threads work a few buckets ahead of its reader; a reader that stops cancels those not started,
    instead of leaving threads to compute them for nobody."""
    from airflow_paimon.format.changes.diff import in_order_parallel

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    started = []

    def work(item):
        started.append(item)
        time.sleep(0 if item == 0 else 1.5)
        return item

    results = in_order_parallel(work, list(range(8)))
    assert next(results) == 0     # items 1 to 3 are submitted by now; 1 and 2 run, 3 waits for a thread
    results.close()
    assert 3 not in started and set(started) <= {0, 1, 2}


def test_diff_between_tags_after_the_snapshots_between_expired(catalog):
    t = make(catalog)
    t.write(rows([1, 2]))
    t.create_tag("monday")
    t.write(rows([1], tag="w"))
    t.write(rows([3]))
    t.delete(pa.table({"id": [2], "dt": ["a"]}))
    t.create_tag("tuesday")
    t.write(rows([9]))
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, older_than=None, now="2100-01-01")
    assert [s.id for s in t.snapshots()] == [5]
    got = feed(t, "monday", "tuesday")   # auto between two tags: diff, as Paimon
    assert sorted(g[1:] for g in got) == sorted([("update_preimage", 1, "a", "v1"), ("update_postimage", 1, "a", "w1"),
                                                 ("insert", 3, "a", "v3"), ("delete", 2, "a", "v2")])
    assert {g[0] for g in got} == {4}
    with pytest.raises(SnapshotExpiredError, match="mode='diff'"):
        t.changes("monday", "tuesday", mode="delta")


def test_sequence_field_decides_what_diff_sees(catalog):
    t = make(catalog, **{"sequence.field": "seq"})
    t.write(rows([1, 2], seq=10))
    t.write(rows([1], tag="old", seq=5))     # older by sequence.field: the row stays v1
    t.write(rows([2], tag="new", seq=11))
    assert sorted(g[1:] for g in feed(t, 1, 3, mode="diff")) == [("update_postimage", 2, "a", "new2"),
                                                                  ("update_preimage", 2, "a", "v2")]
    assert len(feed(t, 1, 3, mode="delta")) == 2   # delta shows what was written, as Paimon's delta does


def test_bounds_by_tag_snapshot_and_time(catalog):
    t = make(catalog)
    t.write(rows([1]))
    t.create_tag("first")
    time.sleep(0.01)
    t.write(rows([2]))
    t.write(rows([3]))
    second = t.snapshot(2).time_millis
    assert [g[2] for g in feed(t, "first", "2")] == [2]
    assert [g[2] for g in feed(t, "1", 3, mode="delta")] == [2, 3]
    at = dt.datetime.fromtimestamp(second / 1000, dt.timezone.utc)
    just_before = at - dt.timedelta(milliseconds=1)   # a time stands for the snapshot current then
    assert [g[2] for g in feed(t, just_before, at, mode="delta")] == [2]
    assert [g[2] for g in feed(t, just_before.isoformat(), at.isoformat(), mode="delta")] == [2]
    assert [g[2] for g in feed(t, 0, at, mode="delta")] == [1, 2]


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(start=3, end=1), InvalidOptionError, "after"),
    (dict(start="no-such-tag-x"), InvalidOptionError, "neither a tag"),
    (dict(start=1, mode="sideways"), InvalidOptionError, "unknown mode"),
    (dict(start=1, mode="changelog"), ChangeModeError, "mode='delta'"),
    (dict(start=1, end=99), Exception, "does not exist"),
    (dict(start=1, columns=["nope"]), InvalidOptionError, "not columns"),
    (dict(), InvalidOptionError, "incremental-between"),
])
def test_bad_requests_raise_one_clear_error_and_change_nothing(catalog, tmp_path, kwargs, error, words):
    t = make(catalog)
    t.write(rows([1]))
    t.write(rows([2]))
    t.write(rows([3]))
    before = tree_digest(tmp_path)
    with pytest.raises(error, match=words):
        t.changes(**kwargs)
    assert tree_digest(tmp_path) == before


def test_overwrite_inside_a_delta_range_is_refused(catalog):
    t = make(catalog)
    t.write(rows([1, 2]))
    messages = t.new_write().write(rows([1], tag="o"), None, t.latest_snapshot())
    t.commit(messages, commit_kind="OVERWRITE")
    t.write(rows([3]))
    with pytest.raises(ChangeModeError, match="OVERWRITE.*mode='diff'"):
        t.changes(1, 3, mode="delta")
    assert sorted(g[1:3] for g in feed(t, 1, 3, mode="diff")) == [("insert", 3), ("update_postimage", 1),
                                                                    ("update_preimage", 1)]


def test_expired_start_of_a_delta_range_names_diff(catalog):
    t = make(catalog)
    for i in range(4):
        t.write(rows([i]))
    t.maintenance.expire_snapshots(retain_min=2, retain_max=2, now="2100-01-01")
    with pytest.raises(SnapshotExpiredError, match="snapshot 2 .*expired"):
        t.changes(1, 4, mode="delta")
    assert [g[2] for g in feed(t, 2, 4, mode="delta")] == [2, 3]


def test_changelog_mode_refuses_a_snapshot_without_its_changelog(catalog):
    """Snapshots written before the producer was set (Paimon's ALTER TABLE ... SET writes a new schema file with
    the option) list no changelog: changelog mode over them is refused, not answered with nothing."""
    import json
    t = make(catalog)
    t.write(rows([1]))
    t.write(rows([2]))
    schema = json.loads((Path(t.path) / "schema" / "schema-0").read_text())
    schema["id"] = 1
    schema["options"]["changelog-producer"] = "input"
    (Path(t.path) / "schema" / "schema-1").write_text(json.dumps(schema))
    t = catalog.get_table("db.t")
    with pytest.raises(ChangeModeError, match="lists no changelog"):
        t.changes(1, 2)   # auto on a table with a producer: changelog


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_changelog_mode_reads_what_the_producer_wrote(catalog, producer):
    """Seed 002's MERGE semantics in the feed of each producer: an update gives its pre- and post-image, a delete
    its delete, a new key its insert; `input` keeps every input row, `lookup` the exact change."""
    t = make(catalog, **{"changelog-producer": producer})
    t.write(rows([1, 2]))                      # 1
    t.write(rows([1], tag="w"))                # 2 (lookup: + a COMPACT snapshot carrying the changelog)
    t.delete(rows([2, 9]).select(["id", "dt"]))
    got = feed(t, 0)
    kinds = [(c, i, v) for _, c, i, _, v in got]
    assert kinds[:2] == [("insert", 1, "v1"), ("insert", 2, "v2")]
    if producer == "input":
        assert kinds[2:] == [("insert", 1, "w1"), ("delete", 2, None), ("delete", 9, None)]
    else:
        assert kinds[2:] == [("update_preimage", 1, "v1"), ("update_postimage", 1, "w1"), ("delete", 2, "v2")]
    assert feed(t, 0) == feed(t, 0, mode="changelog")


def test_renamed_column_reads_under_its_current_name(catalog):
    from airflow_paimon.format.schema_change import SchemaChange
    t = make(catalog)
    t.write(rows([1]))
    t.alter(SchemaChange.rename_column("v", "value"))
    t.write(rows([2]).rename_columns(["id", "dt", "value", "seq"]))
    got = t.changes(0, mode="delta").read_all()
    assert got.column("value").to_pylist() == ["v1", "v2"]


def test_table_options_incremental_between(catalog):
    t = make(catalog)
    t.write(rows([1]))
    t.create_tag("t1")
    t.write(rows([1], tag="w"))
    t.write(rows([2]))
    t.create_tag("t3")
    assert [g[1:3] for g in feed(t, options={"incremental-between": "1,2"})] == [("insert", 1)]
    assert sorted(g[1:3] for g in feed(t, options={"incremental-between": "t1,t3"})) == \
        [("insert", 2), ("update_postimage", 1), ("update_preimage", 1)]
    got = feed(t, options={"incremental-between": "t1,t3", "incremental-between-tag-to-snapshot": "true"})
    assert sorted(g[1:3] for g in got) == [("insert", 1), ("insert", 2)]
    got = feed(t, options={"incremental-between": "1,3", "incremental-between-scan-mode": "diff"})
    assert len(got) == 3
    s1, s3 = t.snapshot(1).time_millis, t.snapshot(3).time_millis
    got = feed(t, options={"incremental-between-timestamp": f"{s1},{s3}"})
    assert [g[0] for g in got] == [2, 3]
    assert feed(t, options={"incremental-between-timestamp": f"{s3 + 1},{s3 + 5}"}) == []
    with pytest.raises(InvalidOptionError, match="incremental-between"):
        t.changes(options={"incremental-between": "t1"})
    with pytest.raises(InvalidOptionError, match="not two snapshot ids"):
        t.changes(options={"incremental-between": "t1,nope"})


def test_incremental_to_auto_tag_starts_at_the_nearest_earlier_periodic_tag(catalog):
    t = make(catalog, **{"tag.automatic-creation": "process-time", "tag.creation-period": "daily"})
    t.write(rows([1]))
    t.create_tag("2026-11-18")
    t.write(rows([2]))
    t.create_tag("2026-11-19")
    t.create_tag("manual")
    t.write(rows([3]))
    t.create_tag("2026-11-21")
    got = feed(t, options={"incremental-to-auto-tag": "2026-11-21"})
    assert [g[1:3] for g in got] == [("insert", 3)]
    assert feed(t, options={"incremental-to-auto-tag": "2026-11-18"}) == []   # no earlier periodic tag
    assert feed(t, options={"incremental-to-auto-tag": "2026-11-25"}) == []   # not there: empty, as Paimon
    with pytest.raises(InvalidOptionError, match="periodic tag"):
        t.changes(options={"incremental-to-auto-tag": "manual"})


def test_append_table_delta_and_no_diff(catalog):
    t = catalog.create_table("db.log", SCHEMA, partition_keys=["dt"])
    t.write(rows([1, 2]))
    t.write(rows([3]))
    assert [g[1:3] for g in feed(t, 1, 2)] == [("insert", 3)]
    with pytest.raises(ChangeModeError, match="primary key"):
        t.changes(1, 2, mode="diff")


def test_a_range_across_a_schema_change_that_cannot_be_mapped_is_refused_before_reading(catalog, tmp_path):
    """Another engine changed `seq` from BIGINT to BYTES (no cast exists): one clear error, no rows, no bytes."""
    import json

    t = make(catalog)
    t.write(rows([1]))
    t.write(rows([2]))
    doc = json.loads(open(f"{t.path}/schema/schema-0").read())
    doc["id"] = 1
    for f in doc["fields"]:
        if f["name"] == "seq":
            f["type"] = "BYTES"
    open(f"{t.path}/schema/schema-1", "w").write(json.dumps(doc))
    t = catalog.get_table("db.t")
    before = tree_digest(tmp_path)
    for mode in ("delta", "diff"):
        with pytest.raises(Exception, match="crosses schema 0 .*'seq' was int64.*cannot be read as"):
            t.changes(0, mode=mode)
    assert t.changes(0, mode="delta", columns=["id", "v"]).read_all().num_rows == 2   # other columns still map
    assert tree_digest(tmp_path) == before


def test_diff_across_a_bucket_rescale_compares_the_partition_as_a_whole(catalog):
    """ALTER ... SET bucket then INSERT OVERWRITE (Paimon's rescale): keys move between buckets, and only the row
    that really changed is reported."""
    import json

    from airflow_paimon.format.commit_message import CommitMessage

    t = make(catalog)
    t.write(rows(range(10)))
    t.create_tag("before")
    doc = json.loads(open(f"{t.path}/schema/schema-0").read())
    doc["id"], doc["options"]["bucket"] = 1, "3"
    open(f"{t.path}/schema/schema-1", "w").write(json.dumps(doc))
    t = catalog.get_table("db.t")
    new = t.new_write().write(pa.concat_tables([rows([0, 2, 3, 4, 5, 6, 7, 8, 9]), rows([1], tag="w")]), None, None)
    assert {m.total_buckets for m in new} == {3}
    gone = [CommitMessage(e.partition, e.bucket, e.total_buckets, [], [e.file])
            for e in t.file_entries(t.latest_snapshot())]
    t.commit(gone + new, commit_kind="OVERWRITE")
    got = feed(t, "before", 2, mode="diff")
    assert [g[1:] for g in got] == [("update_preimage", 1, "a", "v1"), ("update_postimage", 1, "a", "w1")]
    with pytest.raises(ChangeModeError, match="OVERWRITE"):
        t.changes("before", 2, mode="delta")


def test_delta_across_a_bucket_count_change_is_refused(catalog):
    import json

    t = make(catalog)
    t.write(rows([1]))
    doc = json.loads(open(f"{t.path}/schema/schema-0").read())
    doc["id"], doc["options"]["bucket"] = 1, "3"
    open(f"{t.path}/schema/schema-1", "w").write(json.dumps(doc))
    t = catalog.get_table("db.t")
    messages = t.new_write().write(rows([2]), None, None)
    t.commit(messages)
    with pytest.raises(ChangeModeError, match="rescaled.*from 2 to 3.*mode='diff'"):
        t.changes(0, mode="delta")    # refused before the reader exists: no partial feed


def test_diff_skips_shared_files_whose_keys_did_not_change(catalog):
    """Inside a changed bucket, a file both ends share whose key range holds no changed key is not read."""
    t = make(catalog, bucket="1", **{"target-file-size": "1 kb"})
    t.write(rows(range(2000)))
    assert t.maintenance.compact() is not None
    t.create_tag("compacted")
    files = t.file_entries(t.latest_snapshot())
    assert len(files) >= 2
    t.write(rows([5], tag="new"))
    codec = t.partition_codec
    kept = 0
    for e in files:
        lo, hi = (deserialize_row(b, [pa.int64()])[0] for b in (e.file.key_stats.min_values,
                                                                            e.file.key_stats.max_values))
        if not lo <= 5 <= hi:
            os.remove(t.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file))
        else:
            kept += 1
    assert kept == 1
    got = feed(t, "compacted", None, mode="diff")
    assert [g[1:] for g in got] == [("update_preimage", 5, "a", "v5"), ("update_postimage", 5, "a", "new5")]


def test_diff_reads_a_shared_file_once_and_its_values_only_when_it_holds_a_changed_key(catalog, monkeypatch):
    from airflow_paimon.format import key_reads
    from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV
    monkeypatch.setenv(LOOKUP_DIR_ENV, "")   # the data files themselves: test_lookup_files.py covers the copies
    t = make(catalog, bucket="1")
    t.write(rows(range(0, 100, 2)))      # even keys, one file both ends share
    t.create_tag("start")
    t.write(rows([5]))                   # inside the shared file's key range, but not in it
    t.create_tag("insert")
    t.write(rows([4], tag="new"))        # in it
    opened: list[tuple[str, ...]] = []
    real = key_reads.read_data_file

    def counting(io, path, columns, target, rows=None):
        opened.append(columns.names)
        return real(io, path, columns, target, rows)

    monkeypatch.setattr(key_reads, "read_data_file", counting)
    assert [g[1:] for g in feed(t, "start", "insert", mode="diff")] == [("insert", 5, "a", "v5")]
    assert opened == [("id",)]          # its keys only: no value of any other key is decoded
    opened.clear()
    assert [g[1:] for g in feed(t, "insert", None, mode="diff")] == [("update_preimage", 4, "a", "v4"),
                                                                     ("update_postimage", 4, "a", "new4")]
    assert len(opened) == 2 and opened[0] == ("id",)   # keys, then the values of key 4, for both ends at once
