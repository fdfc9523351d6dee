"""The Spark compaction of a `full-compaction` or `lookup` table writes the changelog the library's compaction writes
for the same table state, in its one COMPACT commit."""

from __future__ import annotations

import dataclasses
import shutil

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.spark.compact_app import run_compaction

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def batch(ids, values) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(values, pa.int64())}, schema=SCHEMA)


def table_state(wh: str, producer: str):
    """Two buckets with rows at the top level and above it (updates, deletes, new keys); a `lookup` table gets
    the producer after those writes, so its level-0 rows are still to be described by a compaction."""
    catalog = Catalog(wh)
    catalog.create_database("db")
    first = producer if producer == "full-compaction" else "none"
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2", "changelog-producer": first})
    t.write(batch(range(20), range(20)))
    t.maintenance.compact()
    t.write(batch([1, 2, 3, 25, 26], [100, 200, 300, 25, 26]))
    t.delete(pa.table({"id": pa.array([4, 5, 25], pa.int64())}))
    t.write(batch([2, 27], [2000, 27]))
    if producer == "lookup":
        schema = t.schema()
        assert t.schema_manager.create(dataclasses.replace(schema, id=schema.id + 1,
                                                           options={**schema.options, "changelog-producer": producer}))
        t = catalog.get_table("db.t")
    return t


def changelog(t, start: int) -> list[tuple]:
    rows = t.changes(start, None, mode="changelog").read_all().drop_columns(["_commit_timestamp"]).to_pylist()
    return sorted(tuple(r.values()) for r in rows)


@pytest.mark.parametrize("producer", ["full-compaction", "lookup"])
def test_spark_compaction_writes_the_library_compactions_changelog(spark, tmp_path, producer):
    library_wh, spark_wh = str(tmp_path / "library"), str(tmp_path / "spark")
    library = table_state(library_wh, producer)
    shutil.copytree(library_wh, spark_wh)
    before = library.latest_snapshot().id

    snap = library.maintenance.compact()
    assert snap is not None
    result = run_compaction(spark, {"target": "db.t", "warehouse": spark_wh, "commit_user": "compactor",
                                    "commit_identifier": 1})
    assert result["status"] == "committed" and result["snapshot_id"] == snap.id == before + 1
    spark_table = Catalog(spark_wh).get_table("db.t")
    committed = spark_table.snapshot(snap.id)
    assert committed.commit_kind == "COMPACT" and (committed.changelog_record_count or 0) > 0

    want = changelog(library, before)
    assert want and {r[2] for r in want} >= {"update_preimage", "update_postimage", "insert", "delete"}
    assert changelog(spark_table, before) == want
    assert spark_table.read().sort_by("id").equals(library.read().sort_by("id"))
