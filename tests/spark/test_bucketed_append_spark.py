"""Rows a Spark job appends to a bucketed append table land in the bucket Paimon's hash of the bucket key gives."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.spark.tables import write_changes
from tests.format.test_bucketed_append import SCHEMA, batch

pytestmark = pytest.mark.spark


def test_spark_appends_to_paimons_buckets(spark, warehouse):
    t = warehouse.create_table("db.events", SCHEMA, partition_keys=["p"], options={"bucket": "3", "bucket-key": "id"})
    write_changes(spark, t, spark.createDataFrame(batch(range(30), "s").to_pandas()), kind_column=None)
    entries = t.file_entries(t.latest_snapshot())
    assert {e.bucket for e in entries} == {0, 1, 2}
    for e in entries:
        rows = pq.read_table(f"{t.bucket_dir(t.partition_codec.from_bytes(e.partition), e.bucket)}/{e.file.file_name}")
        assert set(bucket_ids(rows.select(["id"]), 3)) == {e.bucket}
    assert sorted(r["v"] for r in t.read().to_pylist()) == sorted(f"s{i}" for i in range(30))
