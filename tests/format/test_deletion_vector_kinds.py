"""Deletion vectors on two more kinds of table: dynamic-bucket primary-key tables (`bucket = -1`) and append tables.

A dynamic-bucket table with deletion vectors keeps both indexes of a bucket: the HASH index (which bucket a key is
in) and the vectors (which rows of its files are gone). Writes, MERGEs and compaction must leave one live row per
key above level 0, readable without merging.

Append tables take deletion vectors from Paimon's Spark and Flink DELETE/UPDATE (AppendDeleteFileMaintainer): an
unaware-bucket table keeps, per partition, index files of bucket 0 -- possibly several, each holding the vectors
of some data files -- and every data file is read without the rows its vector marks (append files are all at level
0, which is read). This library reads them; it does not write them, and says so.
"""

from __future__ import annotations

import json
import struct
import zlib

import pyarrow as pa
import pytest
from pyroaring import BitMap

from airflow_paimon.format import Catalog
from airflow_paimon.format.commit_message import CommitMessage
from airflow_paimon.format.deletion_vectors import MAGIC_32, VectorRange
from airflow_paimon.format.deletion_vectors_index import INDEX_TYPE, IndexEntry, index_directory, read_index_manifest
from airflow_paimon.format.hash_index import HASH_INDEX
from airflow_paimon.local_merge.engine import merge_in_process
from airflow_paimon.merge import matched_delete, matched_update, not_matched_insert

from .test_deletion_vectors import raw_rows
from .upkeep_helpers import FUTURE

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(ids, v):
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def index_kinds(table) -> dict[str, set[int]]:
    """Index type -> the buckets the latest snapshot has an index file of that type for."""
    out: dict[str, set[int]] = {}
    for e in read_index_manifest(table, table.latest_snapshot().index_manifest):
        out.setdefault(e.index_type, set()).add(e.bucket)
    return out


# ---- deletion vectors on a dynamic-bucket table ------------------------------------------------------------
@pytest.fixture()
def dynamic_dv(tmp_path):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    return catalog.create_table("db.t", SCHEMA, primary_keys=["id"],
                                options={"bucket": "-1", "deletion-vectors.enabled": "true",
                                         "dynamic-bucket.target-row-num": "4"})


def test_writes_and_merges_leave_one_live_row_per_key_in_both_indexes(dynamic_dv):
    t = dynamic_dv
    t.write(rows(range(10), "a"))                        # buckets 0, 1 (4 keys each), 2 (2)
    t.write(rows([1, 5, 9, 10, 11, 12], "b"))             # updates in every bucket; 10, 11 fill 2, 12 opens 3
    t.delete(pa.table({"id": pa.array([2, 11], pa.int64())}))
    source = pa.table({"id": pa.array([0, 3, 6, 20], pa.int64()), "v": ["m0", "m3", "m6", "m20"]})
    result = merge_in_process(t, source, [c.to_dict() for c in (
        matched_delete(condition="s.id = 0"), matched_update(set={"v": "concat(t.v, s.v)"}), not_matched_insert())])
    assert result["engine"] == "local" and result["status"] == "committed"
    expected = {i: f"a{i}" for i in range(10)}
    expected.update({i: f"b{i}" for i in (1, 5, 9, 10, 11, 12)})
    for i in (2, 11, 0):
        del expected[i]
    expected.update({3: "a3m3", 6: "a6m6", 20: "m20"})
    want = sorted(expected.items())
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == want
    # Without merging: the files above level 0, less the vectors' rows, are exactly one row per key.
    assert raw_rows(t) == want
    kinds = index_kinds(t)
    assert kinds[HASH_INDEX] == {0, 1, 2, 3} and kinds[INDEX_TYPE] <= kinds[HASH_INDEX]
    assert len(kinds[INDEX_TYPE]) >= 3

    t.maintenance.compact()
    assert t.latest_snapshot().commit_kind == "COMPACT"
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == want == raw_rows(t)
    assert index_kinds(t) == {HASH_INDEX: {0, 1, 2, 3}}     # compacted buckets need no vectors
    t.write(rows([1, 30], "c"))                                 # a key stays in its bucket after compaction
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == sorted({**expected, 1: "c1", 30: "c30"}
                                                                             .items()) == raw_rows(t)


# ---- deletion vectors on an append table -------------------------------------------------------------------
def _vector_file(positions_by_file: dict[str, list[int]]) -> tuple[bytes, list[VectorRange]]:
    """An index file laid out by Paimon's Table Index spec, built here rather than by the library's encoder:
    version byte 1, then per data file <size BE> <magic BE + portable roaring bitmap> <CRC32 BE>."""
    blob = b"\x01"
    ranges = []
    for name, positions in positions_by_file.items():
        data = struct.pack(">i", MAGIC_32) + BitMap(positions).serialize()
        ranges.append(VectorRange(name, len(blob), len(data), len(positions)))
        blob += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    return blob, ranges


@pytest.fixture()
def append_dv(tmp_path):
    """An unaware-bucket append table with two data files and deletion vectors, as Paimon's DELETE leaves one:
    written as a plain append table, then given `deletion-vectors.enabled` (as ALTER TABLE SET does) and two
    index files of bucket 0, each with the vector of one data file."""
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, options={"bucket": "-1"})
    t.write(rows(range(0, 6), "a"))
    t.write(rows(range(6, 12), "b"))
    schema_file = tmp_path / "wh" / "db.db" / "t" / "schema" / "schema-0"
    meta = json.loads(schema_file.read_text())
    meta["options"]["deletion-vectors.enabled"] = "true"
    schema_file.write_text(json.dumps(meta))
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    files = sorted((e.file for e in t.file_entries(t.latest_snapshot())), key=lambda f: f.min_sequence_number)
    pbytes = t.partition_codec.to_bytes(())
    entries = []
    for f, gone in zip(files, ([1, 4], [0, 5])):
        blob, ranges = _vector_file({f.file_name: gone})
        name = f"index-{f.file_name[5:-8]}-dv"
        t.io.write_bytes(f"{index_directory(t, pbytes, 0)}/{name}", blob)
        entries.append(IndexEntry.deletion_vectors(pbytes, 0, name, len(blob), ranges))
    t.transaction().commit([CommitMessage(pbytes, 0, t.total_buckets, index_adds=entries)])
    return t


def test_an_append_table_is_read_without_the_rows_its_vectors_delete(append_dv):
    t = append_dv
    assert len(read_index_manifest(t, t.latest_snapshot().index_manifest)) == 2
    expected = [(i, f"a{i}") for i in (0, 2, 3, 5)] + [(i, f"b{i}") for i in (7, 8, 9, 10)]
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == expected
    # The snapshot before the vectors still reads every row.
    assert t.read(snapshot_id=t.latest_snapshot().id - 1).num_rows == 12


def test_an_append_table_with_two_index_files_in_a_partition_is_written_deleted_and_compacted(append_dv):
    t = append_dv
    t.write(rows([50], "x"))
    # The partition's two index files (one vector each, as Paimon's unaware-bucket DELETE leaves them) are
    # replaced by one holding their vectors joined with the new deletions, and the new file's vector.
    t.delete(pa.table({"id": pa.array([2, 7, 50], pa.int64())}))
    entries = read_index_manifest(t, t.latest_snapshot().index_manifest)
    assert len(entries) == 1 and len(entries[0].ranges) == 3
    expected = [(i, f"a{i}") for i in (0, 3, 5)] + [(i, f"b{i}") for i in (8, 9, 10)]
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == expected
    t.maintenance.compact()
    assert t.latest_snapshot().index_manifest is None or not read_index_manifest(
        t, t.latest_snapshot().index_manifest)
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == expected


def test_upkeep_keeps_the_index_files_of_an_append_table(append_dv):
    t = append_dv
    expected = sorted((r["id"], r["v"]) for r in t.read().to_pylist())
    live = {e.file_name for e in read_index_manifest(t, t.latest_snapshot().index_manifest)}
    orphan = f"{index_directory(t, t.partition_codec.to_bytes(()), 0)}/index-orphan-0"
    t.io.write_bytes(orphan, b"\x01")
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    t.maintenance.remove_orphan_files(older_than=FUTURE)
    assert not t.io.exists(orphan)
    assert {e.file_name for e in read_index_manifest(t, t.latest_snapshot().index_manifest)} == live
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == expected
