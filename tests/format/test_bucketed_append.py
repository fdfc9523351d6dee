"""Bucketed append tables (`bucket` >= 1 with `bucket-key`): each row goes to the bucket Paimon gives it (the
hash of its bucket-key columns), files per (partition, bucket) keep their own sequence numbers, and compaction
concatenates the small files of each bucket."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog, InvalidOptionError
from airflow_paimon.format.bucketing import bucket_ids

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def batch(ids, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "p": ["a" if i % 2 else "b" for i in ids],
                     "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(tmp_path):
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "3", "bucket-key": "id"})


def test_rows_go_to_paimons_bucket_and_compact_per_bucket(table):
    for v in ("x", "y", "z"):
        table.write(batch(range(40), v))
    files = table.inspect.files().to_pylist()
    assert {f["bucket"] for f in files} == {0, 1, 2}
    entries = table.file_entries(table.latest_snapshot())
    assert {e.total_buckets for e in entries} == {3}
    for e in entries:
        rows = pq.read_table(f"{table.bucket_dir(table.partition_codec.from_bytes(e.partition), e.bucket)}/"
                             f"{e.file.file_name}")
        assert set(bucket_ids(rows.select(["id"]), 3)) == {e.bucket}
    expected = [r for v in ("x", "y", "z") for r in batch(range(40), v).to_pylist()]
    key = lambda r: (r["id"], r["v"])  # noqa: E731
    assert sorted(table.read().to_pylist(), key=key) == sorted(expected, key=key)

    before = len(entries)
    table.maintenance.compact()
    after = table.file_entries(table.latest_snapshot())
    assert len(after) == 6 < before  # one file per (partition, bucket)
    assert sorted(table.read().to_pylist(), key=key) == sorted(expected, key=key)
    # Within a bucket, rows keep their commit order (sequence numbers continue per bucket).
    bucket_rows = [r["v"] for r in table.read().to_pylist() if r["id"] == 7]
    assert bucket_rows == ["x7", "y7", "z7"]


def test_nested_bucket_key_is_refused(tmp_path):
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string()))])
    with pytest.raises(InvalidOptionError, match="bucket-key column 'tags' has the nested type ARRAY<STRING>"):
        c.create_table("db.t", schema, options={"bucket": "2", "bucket-key": "tags"})
