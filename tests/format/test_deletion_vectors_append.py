"""Deletes and updates on append tables with deletion vectors, as Paimon's DELETE / UPDATE leave them: the deleted
rows' positions in deletion-vector index files (one per partition of an unaware-bucket table, one per bucket of a
bucketed one), data files untouched; compaction folds the vectors in. The index files are checked byte by byte
against Paimon's Table Index spec here (decoded with pyroaring, not the library's decoder)."""

from __future__ import annotations

import struct
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap

from airflow_paimon.format import Catalog
from airflow_paimon.format.compact import compact_split, plan_compaction
from airflow_paimon.format.deletion_vectors import MAGIC_32
from airflow_paimon.format.deletion_vectors_index import INDEX_TYPE, index_file_path, read_index_manifest
from airflow_paimon.format.errors import CommitConflictError, InvalidDataError, SchemaMismatchError

from .upkeep_helpers import FUTURE, tree_digest

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def rows(ids, p, v):
    ids = list(ids)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "p": [p] * len(ids), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA
    )


def live(table, **kw) -> list[tuple]:
    return sorted((r["id"], r["p"], r["v"]) for r in table.read(**kw).to_pylist())


def spec_vectors(table) -> dict[tuple[bytes, int], dict[str, set[int]]]:
    """(partition, bucket) -> data file -> deleted positions, decoded from the index files' bytes as Paimon's spec
    lays them out: version byte 1, then per vector <length BE> <magic BE + portable roaring bitmap> <CRC32 BE>."""
    out: dict[tuple[bytes, int], dict[str, set[int]]] = {}
    snap = table.latest_snapshot()
    for e in read_index_manifest(table, snap.index_manifest) if snap.index_manifest else []:
        assert e.index_type == INDEX_TYPE == "DELETION_VECTORS"
        blob = table.io.read_bytes(index_file_path(table, e))
        assert blob[0] == 1
        for name, r in e.ranges.items():
            (size,) = struct.unpack(">i", blob[r.offset : r.offset + 4])
            data = blob[r.offset + 4 : r.offset + 4 + size]
            assert size == r.length
            assert struct.unpack(">i", data[:4])[0] == MAGIC_32
            assert struct.unpack(">I", blob[r.offset + 4 + size : r.offset + 8 + size])[0] == zlib.crc32(data)
            positions = set(BitMap.deserialize(data[4:]))
            assert r.cardinality == len(positions)
            out.setdefault((e.partition, e.bucket), {})[name] = positions
    return out


@pytest.fixture()
def catalog(tmp_path):
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


@pytest.fixture()
def unaware(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"deletion-vectors.enabled": "true"})
    t.write(pa.concat_tables([rows(range(0, 6), "x", "a"), rows(range(100, 104), "y", "a")]))
    t.write(rows(range(6, 12), "x", "b"))
    return t


def test_delete_marks_rows_in_one_index_file_per_partition_and_keeps_the_data_files(unaware):
    t = unaware
    files_before = {e.file.file_name for e in t.file_entries(t.latest_snapshot())}
    expected = [r for r in live(t) if r[0] not in (1, 7, 8, 101)]
    t.delete(pa.table({"id": pa.array([1, 7, 8, 101, 999], pa.int64())}))
    assert live(t) == expected
    assert {e.file.file_name for e in t.file_entries(t.latest_snapshot())} == files_before
    vectors = spec_vectors(t)
    codec = t.partition_codec
    assert set(vectors) == {(codec.to_bytes(("x",)), 0), (codec.to_bytes(("y",)), 0)}
    x = vectors[(codec.to_bytes(("x",)), 0)]
    # Each deleted row's position in its own file: ids 0..5 then 6..11 were written in order.
    assert sorted(x.values(), key=len) == [{1}, {1, 2}]
    assert list(vectors[(codec.to_bytes(("y",)), 0)].values()) == [{1}]
    # The snapshot before the delete still reads every row.
    assert len(live(t, snapshot_id=t.latest_snapshot().id - 1)) == 16


def test_a_second_delete_joins_the_old_vector_and_replaces_the_index_file(unaware):
    t = unaware
    t.delete(pa.table({"id": pa.array([1], pa.int64())}))
    first = {e.file_name for e in read_index_manifest(t, t.latest_snapshot().index_manifest)}
    t.delete(pa.table({"id": pa.array([1, 3], pa.int64()), "v": ["a1", "a3"]}))
    entries = read_index_manifest(t, t.latest_snapshot().index_manifest)
    x = t.partition_codec.to_bytes(("x",))
    assert [e.file_name for e in entries if e.partition == x] != [n for n in first]
    assert len([e for e in entries if e.partition == x]) == 1
    assert [v for v in spec_vectors(t)[(x, 0)].values()] == [{1, 3}]
    assert [r[0] for r in live(t) if r[1] == "x"] == [0, 2, 4, 5, 6, 7, 8, 9, 10, 11]
    # Nothing matches: no commit.
    latest = t.latest_snapshot().id
    assert t.delete(pa.table({"id": pa.array([1], pa.int64())})) is None
    assert t.latest_snapshot().id == latest


def test_update_marks_the_old_rows_and_appends_the_new_ones_in_one_commit(unaware):
    t = unaware
    before = t.latest_snapshot().id
    t.update(pa.concat_tables([rows([2, 9], "x", "new"), rows([500], "y", "new")]), on=["id"])
    assert t.latest_snapshot().id == before + 1
    got = live(t)
    assert (2, "x", "new2") in got and (9, "x", "new9") in got and (500, "y", "new500") in got
    assert (2, "x", "a2") not in got and (9, "x", "b9") not in got
    assert len(got) == 17
    with pytest.raises(InvalidDataError, match="repeat values"):
        t.update(rows([3, 3], "x", "dup"), on=["id"])


def test_commits_are_exactly_once(unaware):
    t = unaware
    first = t.delete(pa.table({"id": pa.array([4], pa.int64())}), commit_user="u", commit_identifier=7)
    again = t.delete(pa.table({"id": pa.array([5], pa.int64())}), commit_user="u", commit_identifier=7)
    assert again.id == first.id == t.latest_snapshot().id
    assert 5 in [r[0] for r in live(t)]


def test_compaction_folds_the_vectors_in(unaware):
    t = unaware
    t.delete(pa.table({"id": pa.array([0, 7, 103], pa.int64())}))
    expected = live(t)
    t.maintenance.compact()
    assert live(t) == expected
    assert spec_vectors(t) == {}
    snap = t.latest_snapshot()
    assert snap.commit_kind == "COMPACT"
    # The rewritten files hold only the live rows.
    raw = []
    for e in t.file_entries(snap):
        raw += (
            pq.read_table(t.data_file_path(t.partition_codec.from_bytes(e.partition), e.bucket, e.file))
            .column("id")
            .to_pylist()
        )
    assert sorted(raw) == sorted(r[0] for r in expected)


def test_upkeep_keeps_the_index_files_live_snapshots_need(unaware):
    t = unaware
    t.delete(pa.table({"id": pa.array([2], pa.int64())}))
    t.delete(pa.table({"id": pa.array([3], pa.int64())}))
    expected = live(t)
    t.create_tag("after-first", snapshot_id=t.latest_snapshot().id - 1)
    tagged = live(t, tag="after-first")
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    t.maintenance.remove_orphan_files(older_than=FUTURE)
    assert live(t) == expected
    assert live(t, tag="after-first") == tagged


def test_a_bucketed_append_table_gets_one_index_file_per_bucket(catalog):
    t = catalog.create_table(
        "db.b", SCHEMA, options={"deletion-vectors.enabled": "true", "bucket": "2", "bucket-key": "id"}
    )
    t.write(rows(range(20), "x", "a"))
    t.delete(pa.table({"id": pa.array([1, 2, 3, 4, 5, 6], pa.int64())}))
    assert sorted(r[0] for r in live(t)) == [0] + list(range(7, 20))
    vectors = spec_vectors(t)
    assert sorted(b for _, b in vectors) == [0, 1]
    assert sum(len(p) for v in vectors.values() for p in v.values()) == 6


def test_bad_deletes_change_nothing(catalog, unaware):
    plain = catalog.create_table("db.plain", SCHEMA)
    plain.write(rows([1, 2], "x", "a"))
    before = tree_digest(plain.path)
    with pytest.raises(InvalidDataError, match="deleting rows of the append table db.plain needs deletion vectors "
                       "to mark the rows it changes: set 'deletion-vectors.enabled'"):
        plain.delete(pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises(InvalidDataError, match="updating rows of the append table db.plain needs deletion vectors"):
        plain.update(rows([1], "x", "b"), on=["id"])
    assert tree_digest(plain.path) == before
    before = tree_digest(unaware.path)
    with pytest.raises(SchemaMismatchError, match="not in db.t"):
        unaware.delete(pa.table({"nope": [1]}))
    with pytest.raises(SchemaMismatchError, match="column types"):
        unaware.delete(pa.table({"id": ["not a number"]}))
    assert tree_digest(unaware.path) == before


def test_a_delete_racing_another_on_the_same_partition_conflicts_and_the_retry_keeps_both(unaware):
    t = unaware
    tx = t.transaction()
    mine = t.new_write().delete_rows(pa.table({"id": pa.array([4], pa.int64())}), tx.base)
    t.delete(pa.table({"id": pa.array([5], pa.int64())}))  # lands first, replacing the index file
    with pytest.raises(CommitConflictError, match="changed by a concurrent commit"):
        tx.commit(mine)
    assert 4 in [r[0] for r in live(t)]
    # Table.delete computes again on the new snapshot when it loses such a race.
    t.delete(pa.table({"id": pa.array([4], pa.int64())}))
    assert not {4, 5} & {r[0] for r in live(t)}


def test_a_compaction_racing_a_delete_conflicts_either_way(unaware):
    t = unaware
    # The compaction, planned before a delete that marks rows of the files it rewrites, must not land.
    base = t.latest_snapshot()
    compaction = [m for m in (compact_split(t, s) for s in plan_compaction(t, base)) if m is not None]
    t.delete(pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises(CommitConflictError, match="deletion vectors of files this commit replaces"):
        t.transaction(kind="COMPACT", base=base).commit(compaction)
    assert 1 not in [r[0] for r in live(t)]
    # The delete, computed before a compaction that removed the files it marks, must not land either.
    tx = t.transaction()
    mine = t.new_write().delete_rows(pa.table({"id": pa.array([2], pa.int64())}), tx.base)
    t.maintenance.compact()
    with pytest.raises(CommitConflictError):
        tx.commit(mine)
    t.delete(pa.table({"id": pa.array([2], pa.int64())}))
    assert not {1, 2} & {r[0] for r in live(t)}


def test_a_delete_racing_a_compaction_of_files_without_vectors_conflicts(unaware):
    t = unaware
    tx = t.transaction()
    mine = t.new_write().delete_rows(pa.table({"id": pa.array([2], pa.int64())}), tx.base)
    t.maintenance.compact()  # partition x's two small files become one; no vectors existed to replace
    with pytest.raises(CommitConflictError, match="data files this commit marks rows of were removed"):
        tx.commit(mine)
    assert 2 in [r[0] for r in live(t)]
