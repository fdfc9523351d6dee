"""Deletion-vector tables (`deletion-vectors.enabled`): the vectors on disk in both of Paimon's bitmap formats,
reads that skip level 0 and apply each file's vector without merging, writes that keep one live row per key above
level 0, compaction that folds the vectors in, and upkeep that keeps the index files live snapshots and tags use."""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401  (pa.parquet)
import pytest
from pyroaring import BitMap

from airflow_paimon.format import CorruptFileError
from airflow_paimon.format.commit_message import CommitMessage
from airflow_paimon.format.data_file import write_kv_file
from airflow_paimon.format.deletion_vectors import MAGIC_32, MAGIC_64, VectorRange, decode_vector, encode_vector
from airflow_paimon.format.deletion_vectors_index import DeletionVectors, IndexEntry, read_index_manifest
from airflow_paimon.format.file_codec import FileCodec
from tests.format.upkeep_helpers import FUTURE

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(ids, v):
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def dv_table(catalog, name="db.t", **options):
    opts = {"bucket": "2", "deletion-vectors.enabled": "true", **options}
    return catalog.create_table(name, SCHEMA, primary_keys=["id"], options=opts)


def raw_rows(table):
    """Every row a reader without merging sees: files above level 0, each without the rows its vector deletes."""
    out = []
    for split in table.plan():
        vectors = DeletionVectors.of(table, table.latest_snapshot()).bucket(split.partition_bytes, split.bucket)
        for f in split.files:
            if f.level == 0:
                continue
            data = pa.parquet.read_table(table.data_file_path(split.partition, split.bucket, f)).to_pydict()
            gone = set(vectors.get(f.file_name, np.zeros(0, np.int64)).tolist())
            out += [(i, v) for n, (i, v) in enumerate(zip(data["id"], data["v"])) if n not in gone]
    return sorted(out)


# ---- the bitmaps ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bitmap64", [False, True])
def test_a_vector_round_trips_in_both_bitmap_formats(bitmap64):
    positions = np.array([0, 3, 4, 5, 70_000, 2**31 - 1] + ([2**32 + 7, 5 * 2**32] if bitmap64 else []), np.int64)
    blob = b"\x01" + encode_vector(positions, bitmap64)
    (size,) = struct.unpack_from(">i", blob, 1)
    # The index manifest records the bitmap data's size (32-bit) or the whole vector's (64-bit), as Paimon does.
    assert np.array_equal(decode_vector(blob, 1, size + 8 if bitmap64 else size, "f"), positions)
    with pytest.raises(CorruptFileError, match="does not match the index manifest's length"):
        decode_vector(blob, 1, size if bitmap64 else size + 8, "f")
    magic = struct.unpack_from("<i" if bitmap64 else ">i", blob, 5)[0]
    assert magic == (MAGIC_64 if bitmap64 else MAGIC_32)


def test_vectors_laid_out_by_the_spec_are_read():
    """Built by hand from the Table Index spec, not by the encoder: size BE, magic, portable roaring, CRC BE."""
    low = BitMap([1, 2, 9])
    data32 = struct.pack(">i", MAGIC_32) + low.serialize()
    data64 = (struct.pack("<i", MAGIC_64) + struct.pack("<q", 2) + struct.pack("<i", 0) + low.serialize()
              + struct.pack("<i", 1) + BitMap([5]).serialize())
    blob = b"\x01"
    offsets = []
    for data in (data32, data64):
        offsets.append((len(blob), len(data) + (8 if data is data64 else 0)))
        blob += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    assert decode_vector(blob, *offsets[0], "f").tolist() == [1, 2, 9]
    assert decode_vector(blob, *offsets[1], "f").tolist() == [1, 2, 9, 2**32 + 5]


def test_a_damaged_vector_is_refused_naming_the_file():
    blob = bytearray(b"\x01" + encode_vector(np.array([1, 2]), False))
    blob[-6] ^= 0xFF
    with pytest.raises(CorruptFileError, match="index file some/index-x: checksum mismatch"):
        decode_vector(bytes(blob), 1, len(blob) - 9, "some/index-x")


def test_the_32_bit_format_refuses_positions_it_cannot_hold():
    with pytest.raises(ValueError, match="deletion-vectors.bitmap64 = true"):
        encode_vector(np.array([2**31]), False)


# ---- reading ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("merge_on_read", [False, True])
def test_a_read_skips_level_0_and_drops_the_rows_a_vector_deletes(catalog, merge_on_read):
    """A vector committed by hand (as another Paimon writer would): without merging, level 0 is not read; with
    `deletion-vectors.merge-on-read` the level-0 rows are merged with the files' live rows."""
    table = dv_table(catalog, **{"deletion-vectors.merge-on-read": str(merge_on_read).lower()})
    table.write(rows(range(10), "a"))   # moved above level 0 by the write
    target = table.file_entries(table.latest_snapshot())[0]
    bucket = target.bucket
    data = pa.parquet.read_table(table.data_file_path((), bucket, target.file)).column("id").to_pylist()
    gone = [data[0], data[-1]]
    blob = b"\x01" + encode_vector(np.array([0, len(data) - 1]), False)
    os.makedirs(f"{table.path}/index", exist_ok=True)
    with open(f"{table.path}/index/index-hand-0", "wb") as f:
        f.write(blob)
    entry = IndexEntry.deletion_vectors(target.partition, bucket, "index-hand-0", len(blob),
                                        [VectorRange(target.file.file_name, 1, len(blob) - 9, 2)])
    level0 = write_kv_file(table.io, table.bucket_dir((), bucket), table.schema(), rows([gone[0]], "z"),
                           pa.array([10_000], pa.int64()), pa.array([0], pa.int8()), FileCodec("zstd"), prefix="data-",
                           stats=table.core_options.stats, level=0)
    table.commit([CommitMessage(target.partition, bucket, 2, [level0], index_adds=[entry])])
    got = dict(zip(*table.read().to_pydict().values()))
    expected = {i: f"a{i}" for i in range(10) if i not in gone}
    if merge_on_read:
        expected[gone[0]] = f"z{gone[0]}"
    assert got == expected


# ---- writing -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bitmap64", ["false", "true"])
def test_writes_leave_one_live_row_per_key_above_level_0(catalog, bitmap64):
    table = dv_table(catalog, **{"deletion-vectors.bitmap64": bitmap64})
    model: dict[int, str] = {}
    steps = [("w", range(0, 40), "a"), ("w", range(20, 60), "b"), ("d", [1, 2, 25, 59], None),
             ("w", range(0, 5), "c"), ("w", [25, 70], "d"), ("d", [70, 71], None)]
    for op, ids, v in steps[:6 if bitmap64 == "false" else 3]:   # the 64-bit case: the format, not the levels
        if op == "w":
            table.write(rows(ids, v))
            model.update({i: f"{v}{i}" for i in ids})
        else:
            table.delete(pa.table({"id": pa.array(list(ids), pa.int64())}))
            for i in ids:
                model.pop(i, None)
    expected = sorted(model.items())
    assert sorted(zip(*table.read().sort_by("id").to_pydict().values())) == expected
    assert raw_rows(table) == expected   # no merge needed: exactly one live row per key
    assert all(e.file.level > 0 for e in table.file_entries(table.latest_snapshot()))
    entries = read_index_manifest(table, table.latest_snapshot().index_manifest)
    assert {e.bucket for e in entries} <= {0, 1} and len(entries) == len({e.bucket for e in entries})
    blob = open(f"{table.path}/index/{entries[0].file_name}", "rb").read()
    first = next(iter(entries[0].ranges.values()))
    magic = struct.unpack_from("<i" if bitmap64 == "true" else ">i", blob, first.offset + 4)[0]
    assert magic == (MAGIC_64 if bitmap64 == "true" else MAGIC_32)


def test_a_sequence_field_decides_which_version_stays_live(catalog):
    """A version written later with a lower `sequence.field` loses: the live row stays the stored one (written
    again above level 0, its old position marked, as Paimon's lookup compaction does); a delete carries no
    sequence value, so it loses against a version that has one. A reader without merging sees one row per key."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("s", pa.int32())])
    table = catalog.create_table("db.s", schema, primary_keys=["id"], options={
        "bucket": "2", "deletion-vectors.enabled": "true", "sequence.field": "s"})

    def write(rows_):
        table.write(pa.table({"id": pa.array([r[0] for r in rows_], pa.int64()), "v": [r[1] for r in rows_],
                              "s": pa.array([r[2] for r in rows_], pa.int32())}))

    def live():
        return {r["id"]: (r["v"], r["s"]) for r in table.read().to_pylist()}

    write([(1, "a", 5), (2, "x", None), (3, "p", 1)])
    write([(1, "b", 3), (3, "q", 1)])              # 1: older, loses; 3: a tie goes to the later row
    assert live() == {1: ("a", 5), 2: ("x", None), 3: ("q", 1)}
    write([(1, "c", 7)])
    table.delete(pa.table({"id": pa.array([1, 2], pa.int64())}))   # 1 keeps c (s = 7); 2 (no s) is deleted
    assert live() == {1: ("c", 7), 3: ("q", 1)}
    assert raw_rows(table) == [(1, "c"), (3, "q")]
    table.maintenance.compact()
    assert live() == {1: ("c", 7), 3: ("q", 1)}


# ---- compaction and upkeep ---------------------------------------------------------------------------------
def test_compaction_folds_the_vectors_into_the_files(catalog):
    table = dv_table(catalog)
    table.write(rows(range(30), "a"))
    table.write(rows(range(10, 20), "b"))
    table.delete(pa.table({"id": pa.array([0, 1], pa.int64())}))
    before = table.read().sort_by("id")
    assert read_index_manifest(table, table.latest_snapshot().index_manifest)
    table.maintenance.compact()
    snap = table.latest_snapshot()
    assert table.read().sort_by("id").equals(before)
    assert snap.index_manifest is None or not read_index_manifest(table, snap.index_manifest)
    assert sum(e.file.row_count for e in table.file_entries(snap)) == before.num_rows
    assert raw_rows(table) == sorted(zip(*before.to_pydict().values()))


def index_files(table):
    return set(os.listdir(f"{table.path}/index"))


def test_upkeep_keeps_the_vectors_live_snapshots_and_tags_use(catalog):
    table = dv_table(catalog)
    table.write(rows(range(20), "a"))
    table.write(rows(range(5), "b"))
    tagged = table.latest_snapshot()
    table.create_tag("t1")
    tagged_index = {e.file_name for e in read_index_manifest(table, tagged.index_manifest)}
    tag_rows = table.read(tag="t1").sort_by("id")
    table.write(rows(range(5, 10), "c"))
    table.delete(pa.table({"id": pa.array([15], pa.int64())}))
    latest_index = {e.file_name for e in read_index_manifest(table, table.latest_snapshot().index_manifest)}
    assert tagged_index - latest_index, "the tag's index files must differ from the latest's"

    table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert tagged_index | latest_index <= index_files(table)
    assert table.read(tag="t1").sort_by("id").equals(tag_rows)

    orphan = f"{table.path}/index/index-orphan-0"
    open(orphan, "wb").write(b"\x01")
    table.maintenance.remove_orphan_files(older_than=FUTURE)
    assert not os.path.exists(orphan)
    assert tagged_index | latest_index <= index_files(table)

    table.maintenance.delete_tag("t1")
    assert not (tagged_index - latest_index) & index_files(table)
    assert latest_index <= index_files(table)
    assert table.read().num_rows == 19


def test_a_rollback_keeps_the_tags_vectors_and_writes_go_on_from_them(catalog):
    table = dv_table(catalog)
    table.write(rows(range(20), "a"))
    table.write(rows(range(5), "b"))
    table.create_tag("t1")
    tagged_index = {e.file_name for e in read_index_manifest(table, table.latest_snapshot().index_manifest)}
    tag_rows = table.read(tag="t1").sort_by("id")
    table.write(rows(range(3, 8), "c"))
    later_index = {e.file_name for e in read_index_manifest(table, table.latest_snapshot().index_manifest)}
    table.maintenance.rollback(to_tag="t1")
    assert table.read().sort_by("id").equals(tag_rows)
    assert tagged_index <= index_files(table) and not (later_index - tagged_index) & index_files(table)
    table.write(rows([4, 30], "d"))
    expected = {i: f"a{i}" for i in range(20)} | {i: f"b{i}" for i in range(5)} | {4: "d4", 30: "d30"}
    assert dict(zip(*table.read().to_pydict().values())) == expected
    assert raw_rows(table) == sorted(expected.items())


def test_a_diff_sees_rows_a_vector_deleted_from_a_file_both_ends_list(catalog):
    """The deleted key's row stays in a file both ends list; only the vector says it is gone."""
    table = dv_table(catalog, bucket="1")
    table.write(rows([1, 2, 3], "a"))
    start = table.latest_snapshot().id
    table.write(rows([2, 4], "b"))
    table.delete(pa.table({"id": pa.array([3], pa.int64())}))
    got = table.changes(start, None, mode="diff").read_all()
    assert sorted(zip(*[got.column(c).to_pylist() for c in ("id", "v", "_change_type")])) == [
        (2, "a2", "update_preimage"), (2, "b2", "update_postimage"), (3, "a3", "delete"), (4, "b4", "insert")]


def test_a_rollback_to_the_append_of_a_commit_pair_leaves_its_rows_pending_per_bucket(catalog):
    """As in Paimon: the APPEND's level-0 files are read by no one until their bucket is compacted, which a write
    into that bucket or a full compaction does; a bucket the next write does not touch keeps them pending."""
    table = dv_table(catalog)
    table.write(rows(range(20), "a"))
    table.write(rows(range(20), "b"))
    pending = table.latest_snapshot().id - 1
    assert table.snapshot(pending).commit_kind == "APPEND"
    table.maintenance.rollback(to_snapshot=pending)
    assert table.read().sort_by("id").column("v").to_pylist() == [f"a{i}" for i in range(20)]
    table.write(rows([0], "c"))
    got = dict(zip(*table.read().to_pydict().values()))
    assert got[0] == "c0"
    same_bucket = {i for i in range(20) if i != 0 and got[i] == f"b{i}"}
    still_a = {i for i in range(20) if got[i] == f"a{i}"}
    # Both buckets held keys of the pending write: the touched bucket shows them, the other one not yet.
    assert same_bucket and still_a and same_bucket | still_a | {0} == set(range(20))
    table.maintenance.compact()
    assert dict(zip(*table.read().to_pydict().values())) == {0: "c0"} | {i: f"b{i}" for i in range(1, 20)}
