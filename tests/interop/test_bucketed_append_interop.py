"""Bucketed append tables (`bucket` >= 1 with `bucket-key`) both ways: pypaimon reads the rows we write, every
file pypaimon writes holds only rows our bucket function sends to its bucket (so both put a row in the same
bucket), and rows we append to pypaimon's table read in pypaimon."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.bucketing import bucket_ids

from .pypaimon_env import run_pypaimon
from .test_format_interop import pypaimon_reads

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string()), ("v", pa.int64())])
OPTIONS = {"bucket": "3", "bucket-key": "id,name"}


def batch(ids, v: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i % 7}" for i in ids],
                     "p": ["a" if i % 2 else "b" for i in ids], "v": pa.array([v] * len(ids), pa.int64())},
                    schema=SCHEMA)


def rows(t: pa.Table) -> list:
    return sorted(tuple(r[n] for n in SCHEMA.names) for r in t.to_pylist())


WRITE = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string()), ("v", pa.int64())])
cat.create_table("db.t", Schema.from_pyarrow_schema(schema, partition_keys=["p"], options=ARGS["options"]), False)
t = cat.get_table("db.t")
for data in ARGS["batches"]:
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.Table.from_pylist(data, schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()
print(json.dumps("ok"))
"""


def assert_files_in_our_buckets(table) -> None:
    entries = table.file_entries(table.latest_snapshot())
    assert {e.bucket for e in entries} == {0, 1, 2}
    for e in entries:
        path = f"{table.bucket_dir(table.partition_codec.from_bytes(e.partition), e.bucket)}/{e.file.file_name}"
        assert set(bucket_ids(pq.read_table(path).select(["id", "name"]), 3)) == {e.bucket}, path


def test_pypaimon_reads_our_bucketed_append_table(tmp_path):
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options=OPTIONS)
    t.write(batch(range(60), 1))
    t.write(batch(range(30, 90), 2))
    t.maintenance.compact()
    [theirs] = pypaimon_reads(wh, "db.t", [{}], tmp_path / "out")
    assert rows(theirs) == rows(t.read()) == rows(pa.concat_tables([batch(range(60), 1), batch(range(30, 90), 2)]))


def test_we_write_pypaimons_buckets_and_append_to_its_table(tmp_path):
    wh = str(tmp_path / "wh")
    run_pypaimon(WRITE, {"warehouse": wh, "options": OPTIONS,
                         "batches": [batch(range(60), 1).to_pylist(), batch(range(30, 90), 2).to_pylist()]})
    t = Catalog(wh).get_table("db.t")
    assert_files_in_our_buckets(t)  # pypaimon's files: its buckets are ours
    t.write(batch(range(80, 120), 3))
    assert_files_in_our_buckets(t)
    [theirs] = pypaimon_reads(wh, "db.t", [{}], tmp_path / "out")
    expected = pa.concat_tables([batch(range(60), 1), batch(range(30, 90), 2), batch(range(80, 120), 3)])
    assert rows(theirs) == rows(t.read()) == rows(expected)
