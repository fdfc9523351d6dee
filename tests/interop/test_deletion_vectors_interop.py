"""Deletion-vector tables between pypaimon and this library.

pypaimon 2.1.0 writes deletion-vector primary-key tables but never compacts them: its rows stay at level 0,
which Paimon's batch reads of such tables skip, so pypaimon and this library both read nothing. After this
library's writes and deletes (which move those rows up and mark the older versions in deletion vectors),
pypaimon reads one row per key without merging (every split raw-convertible, no level-0 file), and the same rows
as this library. pypaimon's own deletion-vector serialiser (its pure-Python RoaringBitmap) produces vectors that
this library decodes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.deletion_vectors import decode_vector
from airflow_paimon.format.deletion_vectors_index import read_index_manifest

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

POSITIONS = [0, 1, 2, 7, 65_535, 65_536, 1_000_000]

WRITE = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.deletionvectors import BitmapDeletionVector
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
cat.create_table("db.t", Schema.from_pyarrow_schema(schema, partition_keys=["p"], primary_keys=["p", "id"],
                 options={"bucket": "2", "deletion-vectors.enabled": "true"}), False)
t = cat.get_table("db.t")
for ids, v in ((range(0, 20), 1), (range(10, 30), 2)):
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": pa.array(list(ids), pa.int64()), "p": ["a"] * len(ids),
                            "v": pa.array([v] * len(ids), pa.int64())}, schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()
dv = BitmapDeletionVector()
for p in ARGS["positions"]:
    dv.delete(p)
rb = t.new_read_builder()
print(json.dumps({"vector": dv.serialize().hex(), "rows": rb.new_read().to_arrow(rb.new_scan().plan().splits())
                  .num_rows}))
"""

READ = """
from pypaimon import CatalogFactory
t = CatalogFactory.create({"warehouse": ARGS["warehouse"]}).get_table("db.t")
rb = t.new_read_builder()
splits = rb.new_scan().plan().splits()
rows = sorted([r["id"], r["p"], r["v"]] for r in rb.new_read().to_arrow(splits).to_pylist()) if splits else []
print(json.dumps({"rows": rows, "raw": [s.raw_convertible for s in splits],
                  "levels": sorted({f.level for s in splits for f in s.files}),
                  "vectors": sum(1 for s in splits for d in (s.data_deletion_files or []) if d is not None)}))
"""


def ours(table) -> list[list]:
    return sorted([r["id"], r["p"], r["v"]] for r in table.read().to_pylist())


def batch(ids, v) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "p": ["a"] * len(ids),
                     "v": pa.array([v] * len(ids), pa.int64())})


def assert_read_without_merging_then_compacted(wh: str, table, expected: list[list]) -> None:
    """pypaimon reads `expected` from raw files above level 0 with vectors applied, then again after our
    compaction folded the vectors in."""
    after = run_pypaimon(READ, {"warehouse": wh})
    assert after["rows"] == expected
    assert all(after["raw"]) and 0 not in after["levels"] and after["vectors"] > 0
    assert ours(table) == expected
    table.maintenance.compact()
    compacted = run_pypaimon(READ, {"warehouse": wh})
    assert compacted["rows"] == expected and compacted["vectors"] == 0
    assert ours(table) == expected


def test_pypaimon_reads_our_deletion_vectors_without_merging(tmp_path):
    wh = str(tmp_path / "wh")
    written = run_pypaimon(WRITE, {"warehouse": wh, "positions": POSITIONS})
    blob = b"\x01" + bytes.fromhex(written["vector"])
    assert decode_vector(blob, 1, len(blob) - 9, "pypaimon").tolist() == POSITIONS

    table = Catalog(wh).get_table("db.t")
    assert written["rows"] == 0 and ours(table) == []   # pypaimon's rows wait at level 0 for a compaction

    table.write(batch(range(25, 35), 3))
    table.delete(pa.table({"id": pa.array([0, 12, 26], pa.int64()), "p": ["a"] * 3}))
    table.write(batch([5, 12, 40], 4))
    model = {i: 1 for i in range(0, 10)} | {i: 2 for i in range(10, 25)} | {i: 3 for i in range(25, 35)}
    for i in (0, 12, 26):
        model.pop(i)
    model |= {5: 4, 12: 4, 40: 4}
    expected = sorted([i, "a", v] for i, v in model.items())

    assert_read_without_merging_then_compacted(wh, table, expected)
    assert np.all([e.file.level > 0 for e in table.file_entries(table.latest_snapshot())])


CREATE_DYNAMIC = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
cat.create_table("db.t", Schema.from_pyarrow_schema(schema, partition_keys=["p"], primary_keys=["p", "id"],
                 options={"bucket": "-1", "deletion-vectors.enabled": "true",
                          "dynamic-bucket.target-row-num": "4"}), False)
t = cat.get_table("db.t")
wb = t.new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
ids = ARGS["ids"]
w.write_arrow(pa.table({"id": pa.array(ids, pa.int64()), "p": ["a"] * len(ids),
                        "v": pa.array([1] * len(ids), pa.int64())}, schema=schema))
c.commit(w.prepare_commit())
w.close(); c.close()
print(json.dumps(None))
"""


def test_our_writes_to_a_dynamic_bucket_deletion_vector_table_pypaimon_wrote_read_one_row_per_key(tmp_path):
    """pypaimon creates and fills a dynamic-bucket table with deletion vectors (its rows wait at level 0); we
    update, delete, merge and compact it, and pypaimon reads one row per key without merging."""
    from airflow_paimon.format.hash_index import HASH_INDEX
    from airflow_paimon.local_merge.engine import merge_in_process
    from airflow_paimon.merge import matched_update, not_matched_insert

    wh = str(tmp_path / "wh")
    run_pypaimon(CREATE_DYNAMIC, {"warehouse": wh, "ids": list(range(12))})
    table = Catalog(wh).get_table("db.t")
    hashes = [e for e in read_index_manifest(table, table.latest_snapshot().index_manifest)
              if e.index_type == HASH_INDEX]
    assert len(hashes) == 3, "pypaimon's HASH index should spread 12 keys over 3 buckets of 4"

    table.write(batch([1, 5, 9, 12, 13], 2))
    table.delete(pa.table({"id": pa.array([2, 13], pa.int64()), "p": ["a", "a"]}))
    merge_in_process(table, batch([3, 7, 20], 3), [c.to_dict() for c in (matched_update(), not_matched_insert())])
    model = {i: 1 for i in range(12)} | {1: 2, 5: 2, 9: 2, 12: 2} | {3: 3, 7: 3, 20: 3}
    model.pop(2)
    expected = sorted([i, "a", v] for i, v in model.items())
    assert_read_without_merging_then_compacted(wh, table, expected)
