"""A MERGE into a table whose schema evolved (renamed, widened, dropped and re-added columns) reads the target's
old files through field ids, and the Spark compaction keeps the values."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.schema_change import SchemaChange
from airflow_paimon.merge import matched_update, not_matched_insert
from airflow_paimon.spark.compact_app import run_compaction
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.spark.tables import read_table_df

pytestmark = pytest.mark.spark

BEFORE = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float32()), ("qty", pa.int32()),
                    ("status", pa.string())])
AFTER = pa.schema([("id", pa.int64()), ("label", pa.string()), ("amount", pa.float64()), ("qty", pa.int64()),
                   ("status", pa.string())])


def test_merge_and_compaction_of_an_evolved_table(spark, warehouse, tmp_path):
    cat = warehouse
    t = cat.create_table("db.t", BEFORE, primary_keys=["id"], options={"bucket": "2"})
    t.write(pa.Table.from_pylist([{"id": i, "name": f"n{i}", "amount": i + 0.5, "qty": i, "status": "old"}
                                  for i in range(20)], schema=BEFORE))
    t.alter(SchemaChange.rename_column("name", "label"), SchemaChange.update_column_type("amount", "DOUBLE"),
            SchemaChange.update_column_type("qty", "BIGINT"), SchemaChange.drop_column("status"))
    t.alter(SchemaChange.add_column("status", "STRING"))
    assert [(f.name, f.type) for f in cat.get_table("db.t").arrow_schema()] == [(f.name, f.type) for f in AFTER]

    source = [{"id": i, "label": f"s{i}", "amount": 1.0, "qty": 2**33, "status": "new"} for i in range(10, 30)]
    path = tmp_path / "src.parquet"
    pq.write_table(pa.Table.from_pylist(source, schema=AFTER), path)
    clauses = [matched_update(set={"label": "concat(t.label, '|', s.label)", "qty": "t.qty + s.qty",
                                   "amount": "t.amount + s.amount"}),
               not_matched_insert(values="*")]
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": str(path), "commit_user": "test",
            "commit_identifier": 1, "driver_bytes": 0, "clauses": [c.to_dict() for c in clauses]}
    r = run_merge(spark, json.loads(json.dumps(spec)))
    assert r["status"] == "committed" and r["mode"] == "merge"

    expected = [{"id": i, "label": f"n{i}", "amount": i + 0.5, "qty": i, "status": None} for i in range(10)]
    expected += [{"id": i, "label": f"n{i}|s{i}", "amount": i + 1.5, "qty": i + 2**33, "status": None}
                 for i in range(10, 20)]
    expected += [{"id": i, "label": f"s{i}", "amount": 1.0, "qty": 2**33, "status": "new"} for i in range(20, 30)]

    def library_rows():
        return sorted(cat.get_table("db.t").read().to_pylist(), key=lambda x: x["id"])

    assert library_rows() == expected
    spark_rows = read_table_df(spark, cat.get_table("db.t")).orderBy("id").collect()
    assert [x.asDict() for x in spark_rows] == expected

    c = run_compaction(spark, {"target": "db.t", "warehouse": cat.warehouse})
    assert c["status"] == "committed"
    assert library_rows() == expected
    table = cat.get_table("db.t")
    assert {e.file.schema_id for e in table.file_entries(table.latest_snapshot())} == {2}
