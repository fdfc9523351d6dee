"""Dynamic-bucket primary-key tables (`bucket = -1`): keys go where the HASH index says, new keys fill buckets as
Paimon's assigner fills them, and each commit records the new HASH index files of the buckets it changed.

The expectations are computed here from the rules (Paimon's PartitionIndex.assign): a key's bucket is read back
from the data files, and its hash from `bucketing.hash_codes`, the hash Paimon's fixed buckets are checked
against bit for bit (tests/format/test_binary_row.py, tests/interop/test_bucketing_interop.py).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog, CommitConflictError, InvalidOptionError, UnsupportedTableError
from airflow_paimon.format.bucketing import hash_codes
from airflow_paimon.format.deletion_vectors_index import read_index_manifest
from airflow_paimon.format.hash_index import HASH_INDEX, read_hashes

from .upkeep_helpers import FUTURE, all_files, check_all_readable, delete, index_paths, rows, tree_digest, upsert

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])


def _table(tmp_path, target: int = 3, partitioned: bool = True, **options: str):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db", ignore_if_exists=True)
    opts = {"bucket": "-1", "dynamic-bucket.target-row-num": str(target), **options}
    return catalog.create_table("db.t", SCHEMA, primary_keys=["p", "id"] if partitioned else ["id"],
                                partition_keys=["p"] if partitioned else [], options=opts)


def _hash(i: int) -> int:
    return int(hash_codes(pa.table({"id": pa.array([i], pa.int64())}))[0])


def index_of(table, snapshot=None) -> dict[tuple[bytes, int], tuple[str, set[int]]]:
    """(partition, bucket) -> (index file name, its hashes) of a snapshot's HASH index."""
    snap = snapshot or table.latest_snapshot()
    return {(e.partition, e.bucket): (e.file_name, set(read_hashes(table, e).tolist()))
            for e in read_index_manifest(table, snap.index_manifest) if e.index_type == HASH_INDEX}


def buckets_of(table) -> dict[tuple[str, int], set[int]]:
    """(partition value, bucket) -> the ids whose rows the data files of the latest snapshot hold there."""
    out: dict[tuple[str, int], set[int]] = {}
    codec = table.partition_codec
    for e in table.file_entries(table.latest_snapshot()):
        p = codec.from_bytes(e.partition)
        ids = pq.read_table(table.data_file_path(p, e.bucket, e.file)).column("id").to_pylist()
        out.setdefault((p[0], e.bucket), set()).update(ids)
    return out


def test_new_keys_fill_each_bucket_to_the_target_then_open_the_next(tmp_path):
    t = _table(tmp_path, target=3)
    upsert(t, [5, 1, 9, 3, 7, 2, 8], 1)
    # In arrival order: three keys per bucket, lowest bucket first.
    assert buckets_of(t) == {("a", 0): {5, 1, 9}, ("a", 1): {3, 7, 2}, ("a", 2): {8}}
    index = index_of(t)
    pa_ = t.partition_codec.to_bytes(("a",))
    assert {b: h for (p, b), (_, h) in index.items() if p == pa_} == {
        0: {_hash(i) for i in (5, 1, 9)}, 1: {_hash(i) for i in (3, 7, 2)}, 2: {_hash(8)}}


def test_a_key_stays_in_its_bucket_and_only_changed_buckets_get_new_index_files(tmp_path):
    t = _table(tmp_path, target=3)
    upsert(t, range(7), 1)
    before = index_of(t)
    # Updates of keys in buckets 0 and 1 change no index; the new keys fill bucket 2, then open bucket 3.
    upsert(t, [0, 4, 100, 101, 102], 2)
    after = index_of(t)
    pa_ = t.partition_codec.to_bytes(("a",))
    assert after[(pa_, 0)] == before[(pa_, 0)] and after[(pa_, 1)] == before[(pa_, 1)]
    assert after[(pa_, 2)][1] == {_hash(i) for i in (6, 100, 101)} and after[(pa_, 2)][0] != before[(pa_, 2)][0]
    assert after[(pa_, 3)][1] == {_hash(102)}
    assert buckets_of(t) == {("a", 0): {0, 1, 2}, ("a", 1): {3, 4, 5}, ("a", 2): {6, 100, 101}, ("a", 3): {102}}
    assert rows(t.read()) == sorted([(i, "a", 2 if i in (0, 4) else 1) for i in range(7)] +
                                    [(i, "a", 2) for i in (100, 101, 102)])


def test_a_deleted_key_keeps_its_hash_and_comes_back_to_its_bucket(tmp_path):
    t = _table(tmp_path, target=2)
    upsert(t, [1, 2, 3], 1)
    delete(t, [1])
    upsert(t, [4, 1], 2)
    # 1 returns to bucket 0; 4 goes to bucket 1 (bucket 0 is full with the hashes of 1 and 2).
    assert buckets_of(t) == {("a", 0): {1, 2}, ("a", 1): {3, 4}}
    assert rows(t.read()) == [(1, "a", 2), (2, "a", 1), (3, "a", 1), (4, "a", 2)]


def test_deleting_an_unknown_key_adds_its_hash_as_paimon_does(tmp_path):
    t = _table(tmp_path, target=5, partitioned=False)
    upsert(t, [1], 1)
    delete(t, [2])
    assert index_of(t)[(t.partition_codec.to_bytes(()), 0)][1] == {_hash(1), _hash(2)}
    assert rows(t.read()) == [(1, "a", 1)]


def test_partitions_have_their_own_buckets(tmp_path):
    t = _table(tmp_path, target=2)
    t.write(pa.table({"id": pa.array([1, 2, 3, 1, 2], pa.int64()), "p": ["a", "a", "a", "b", "b"],
                      "v": pa.array([1] * 5, pa.int64())}))
    assert buckets_of(t) == {("a", 0): {1, 2}, ("a", 1): {3}, ("b", 0): {1, 2}}


def test_max_buckets_caps_a_partition_and_extra_keys_join_existing_buckets(tmp_path):
    t = _table(tmp_path, target=1, **{"dynamic-bucket.max-buckets": "2"})
    upsert(t, range(6), 1)
    placed = buckets_of(t)
    assert set(placed) == {("a", 0), ("a", 1)} and {0} <= placed[("a", 0)] and {1} <= placed[("a", 1)]
    assert set().union(*placed.values()) == set(range(6))
    upsert(t, range(6), 2)   # each key again where it is: still one row per key
    assert rows(t.read()) == [(i, "a", 2) for i in range(6)]
    assert buckets_of(t) == placed


def test_compaction_keeps_the_index(tmp_path):
    t = _table(tmp_path, target=2)
    for v in range(3):
        upsert(t, range(5), v)
    before = index_of(t)
    t.maintenance.compact()
    assert t.latest_snapshot().commit_kind == "COMPACT"
    assert index_of(t) == before
    upsert(t, [0, 9], 7)
    assert rows(t.read()) == sorted([(i, "a", 2) for i in range(1, 5)] + [(0, "a", 7), (9, "a", 7)])


def _rows(ids, v):
    return pa.table({"id": pa.array(ids, pa.int64()), "p": ["a"] * len(ids), "v": pa.array([v] * len(ids), pa.int64())})


def test_concurrent_new_keys_are_a_conflict_that_leaves_no_files(tmp_path):
    t = _table(tmp_path, target=2)
    upsert(t, [1], 1)
    tx = t.transaction()
    messages = t.new_write().write(_rows([2, 3], 2), base_snapshot=tx.base)
    assert any(m.index_adds for m in messages)
    upsert(t, [4], 3)   # lands first: its new key took the free place in bucket 0 as well
    files = all_files(t.path)
    with pytest.raises(CommitConflictError, match="nothing was committed"):
        tx.commit(messages)
    new_index = {f"{t.path}/index/{e.file_name}" for m in messages for e in m.index_adds}
    assert new_index <= files and not new_index & all_files(t.path)
    # A write through Table.write retries on the new snapshot instead.
    upsert(t, [2, 3], 2)
    assert rows(t.read()) == [(1, "a", 1), (2, "a", 2), (3, "a", 2), (4, "a", 3)]
    assert buckets_of(t) == {("a", 0): {1, 4}, ("a", 1): {2, 3}}


def test_concurrent_updates_of_other_buckets_do_not_conflict(tmp_path):
    t = _table(tmp_path, target=1)
    upsert(t, [1, 2], 1)
    tx = t.transaction()
    messages = t.new_write().write(_rows([1], 2), base_snapshot=tx.base)
    assert not any(m.index_adds for m in messages)
    upsert(t, [2], 3)
    tx.commit(messages)
    assert rows(t.read()) == [(1, "a", 2), (2, "a", 3)]


def test_the_index_check_refuses_a_commit_over_a_changed_index(tmp_path):
    t = _table(tmp_path, target=1, **{"dynamic-bucket.max-buckets": "1"})
    upsert(t, [1], 1)
    tx = t.transaction()
    messages = t.new_write().write(_rows([1, 2], 2), base_snapshot=tx.base)
    other = t.transaction(base=tx.base)
    other_messages = t.new_write().write(_rows([3], 3), base_snapshot=tx.base)
    for m in other_messages:   # as if another writer had put its new key in another bucket
        m.bucket = 5
    other.commit(other_messages)
    with pytest.raises(CommitConflictError, match="HASH index of a partition this commit writes was changed"):
        tx.commit(messages)


def test_bad_dynamic_bucket_options_are_refused_and_change_nothing(tmp_path):
    t = _table(tmp_path, target=2)
    upsert(t, [1], 1)
    before = tree_digest(t.path)
    with pytest.raises(InvalidOptionError, match="dynamic-bucket.max-buckets"):
        _table(tmp_path / "other", **{"dynamic-bucket.max-buckets": "-3"})
    with pytest.raises(UnsupportedTableError, match="cannot create db.t: .*with a bucket-key"):
        _table(tmp_path / "keyed", **{"bucket-key": "id"})
    assert tree_digest(t.path) == before


def test_a_cross_partition_upsert_table_is_refused_when_created(tmp_path):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    with pytest.raises(UnsupportedTableError, match="cannot create db.t: .*cross-partition upsert table"):
        catalog.create_table("db.t", SCHEMA, primary_keys=["id"], partition_keys=["p"], options={"bucket": "-1"})
    assert not os.path.exists(tmp_path / "wh" / "db.db" / "t" / "snapshot")


def test_upkeep_keeps_the_index_files_live_snapshots_and_tags_use(tmp_path):
    t = _table(tmp_path, target=2, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    upsert(t, [1, 2, 3], 1)
    t.create_tag("first")
    tagged = index_paths(t, t.latest_snapshot())
    upsert(t, [4, 5], 2)
    upsert(t, [6, 7], 3)
    superseded = index_paths(t, t.snapshot(2)) - index_paths(t, t.latest_snapshot()) - tagged
    assert superseded, "no index file was replaced: the test would prove nothing"
    t.maintenance.expire_snapshots(older_than=FUTURE)
    check_all_readable(t)
    existing = all_files(t.path)
    assert tagged <= existing and not superseded & existing

    t.maintenance.remove_orphan_files(older_than=FUTURE)
    check_all_readable(t)
    assert tagged | index_paths(t, t.latest_snapshot()) <= all_files(t.path)

    t.maintenance.rollback(to_tag="first")
    check_all_readable(t)
    upsert(t, [3, 4], 9)   # assigned from the tag's index: 3 stays in bucket 1
    assert buckets_of(t) == {("a", 0): {1, 2}, ("a", 1): {3, 4}}
    t.maintenance.delete_tag("first")
    t.maintenance.expire_snapshots(older_than=FUTURE)
    check_all_readable(t)
    gone = tagged - index_paths(t, t.latest_snapshot())
    assert gone and not gone & all_files(t.path)
