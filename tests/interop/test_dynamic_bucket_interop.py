"""Dynamic-bucket primary-key tables (`bucket = -1`) written in turns by pypaimon and by this library.

A key must stay in the bucket the table's HASH index gives it, whoever writes: a writer that put an updated key
in another bucket would leave two rows for it (merge-on-read merges within a bucket only), and a writer that left
a new key out of the index would let the next writer put it elsewhere. So each side writes after the other,
updating keys the other side wrote and adding new ones, with a small `dynamic-bucket.target-row-num` so that keys
spread over several buckets; pypaimon then reads exactly one row per key with the latest values, and this library
reads the same.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.deletion_vectors_index import read_index_manifest
from airflow_paimon.format.hash_index import HASH_INDEX, read_hashes

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

OPTIONS = {"bucket": "-1", "dynamic-bucket.target-row-num": "4"}

_COMMON = """
import json
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])

def write(t, rows):
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "p": [r[1] for r in rows],
                            "v": pa.array([r[2] for r in rows], pa.int64())}, schema=SCHEMA))
    c.commit(w.prepare_commit())
    w.close(); c.close()

def read(t):
    rb = t.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted([r["id"], r["p"], r["v"]] for r in data.to_pylist())
"""

CREATE_AND_WRITE = _COMMON + """
cat.create_database("db", True)
cat.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, partition_keys=["p"], primary_keys=["p", "id"],
                 options=ARGS["options"]), False)
write(cat.get_table("db.t"), ARGS["rows"])
print(json.dumps(read(cat.get_table("db.t"))))
"""

READ_WRITE_READ = _COMMON + """
before = read(cat.get_table("db.t"))
write(cat.get_table("db.t"), ARGS["rows"])
print(json.dumps({"before": before, "after": read(cat.get_table("db.t"))}))
"""


def _write(table, rows) -> None:
    table.write(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "p": [r[1] for r in rows],
                          "v": pa.array([r[2] for r in rows], pa.int64())}))


def _expected(*batches) -> list[list]:
    latest: dict[tuple, int] = {}
    for rows in batches:
        for i, p, v in rows:
            latest[(i, p)] = v
    return sorted([i, p, v] for (i, p), v in latest.items())


def _hash_buckets(table) -> dict[bytes, dict[int, set[int]]]:
    """partition -> bucket -> the key hashes its HASH index file holds (latest snapshot)."""
    out: dict[bytes, dict[int, set[int]]] = {}
    for e in read_index_manifest(table, table.latest_snapshot().index_manifest):
        assert e.index_type == HASH_INDEX
        out.setdefault(e.partition, {})[e.bucket] = set(read_hashes(table, e).tolist())
    return out


def _read(table) -> list[list]:
    return sorted([r["id"], r["p"], r["v"]] for r in table.read().to_pylist())


def test_we_upsert_into_a_table_pypaimon_wrote_and_it_reads_one_row_per_key(tmp_path):
    wh = str(tmp_path / "wh")
    first = [(i, "a" if i % 3 else "b", 1) for i in range(12)]
    assert run_pypaimon(CREATE_AND_WRITE, {"warehouse": wh, "options": OPTIONS, "rows": first}) == _expected(first)
    table = Catalog(wh).get_table("db.t")
    before = _hash_buckets(table)
    assert max(len(b) for b in before.values()) >= 2, "pypaimon filled one bucket: the test would prove little"

    # Updates of every key pypaimon wrote, and new keys in both partitions.
    ours = [(i, "a" if i % 3 else "b", 2) for i in range(6, 20)]
    _write(table, ours)
    table.delete(pa.table({"id": pa.array([7], pa.int64()), "p": ["a"]}))
    expected = [r for r in _expected(first, ours) if r[:2] != [7, "a"]]
    assert _read(table) == expected
    after = _hash_buckets(table)
    for partition, buckets in before.items():
        for bucket, hashes in buckets.items():
            assert hashes <= after[partition][bucket], "a key left the bucket pypaimon's index put it in"

    # pypaimon reads our upsert, then writes on from our index: updates of keys we added and deleted, and new keys.
    theirs = [(i, "a" if i % 3 else "b", 3) for i in (7, 15, 16, 17, 25, 26)]
    final = [r for r in _expected(first, ours, theirs) if r[:2] != [7, "a"] or r[2] == 3]
    assert run_pypaimon(READ_WRITE_READ, {"warehouse": wh, "rows": theirs}) == {"before": expected, "after": final}
    assert _read(Catalog(wh).get_table("db.t")) == final


def test_pypaimon_reads_and_writes_on_a_dynamic_bucket_table_written_here(tmp_path):
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())]),
                                 primary_keys=["p", "id"], partition_keys=["p"], options=OPTIONS)
    first = [(i, "a" if i % 2 else "b", 1) for i in range(14)]
    _write(table, first)
    second = [(i, "a" if i % 2 else "b", 2) for i in range(10, 18)]
    _write(table, second)
    buckets = _hash_buckets(table)
    assert all(len(b) >= 2 for b in buckets.values()), buckets

    theirs = [(i, "a" if i % 2 else "b", 3) for i in (0, 1, 12, 13, 30, 31)]
    final = _expected(first, second, theirs)
    assert run_pypaimon(READ_WRITE_READ, {"warehouse": wh, "rows": theirs}) == {"before": _expected(first, second),
                                                                               "after": final}
    assert _read(catalog.get_table("db.t")) == final
