"""Spark reads of append tables with deletion vectors (written by the library's deletes and updates), and the Spark
compaction folding the vectors in: the rows the vectors delete never reach a DataFrame."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format.deletion_vectors_index import read_index_manifest
from airflow_paimon.spark.compact_app import run_compaction
from airflow_paimon.spark.tables import read_table_df

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def _rows(ids, p, v):
    ids = list(ids)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "p": [p] * len(ids), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA
    )


def _sorted(rows):
    return sorted((r["id"], r["p"], r["v"]) for r in rows)


@pytest.mark.parametrize("options", [{}, {"bucket": "2", "bucket-key": "id"}], ids=["unaware", "bucketed"])
def test_spark_reads_a_deletion_vector_append_table_as_the_library_does(spark, warehouse, options):
    t = warehouse.create_table(
        "db.dv", SCHEMA, partition_keys=["p"], options={"deletion-vectors.enabled": "true", **options}
    )
    t.write(pa.concat_tables([_rows(range(0, 30), "x", "a"), _rows(range(100, 120), "y", "a")]))
    t.write(_rows(range(30, 40), "x", "b"))
    t.delete(pa.table({"id": pa.array([1, 2, 31, 105], pa.int64())}))
    t.update(_rows([3, 110], "x", "new"), on=["id"])
    assert read_index_manifest(t, t.latest_snapshot().index_manifest)
    expected = _sorted(t.read().to_pylist())
    assert len(expected) == 60 - 4  # 4 deleted; 2 updated (old rows marked, new rows appended)
    assert not {1, 2, 31, 105} & {r[0] for r in expected}
    assert _sorted(r.asDict() for r in read_table_df(spark, t).collect()) == expected
    # An earlier snapshot, before the vectors, still has every row.
    assert read_table_df(spark, t, snapshot_id=2).count() == 60

    run_compaction(spark, {"target": "db.dv", "warehouse": warehouse.warehouse})
    snap = t.latest_snapshot()
    assert snap.commit_kind == "COMPACT"
    assert not snap.index_manifest or not read_index_manifest(t, snap.index_manifest)
    assert _sorted(t.read().to_pylist()) == expected
    assert _sorted(r.asDict() for r in read_table_df(spark, t).collect()) == expected
