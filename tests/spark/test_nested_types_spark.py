"""ARRAY, MAP and ROW columns through Spark: read as Spark's ArrayType, MapType and StructType (nested nulls
kept), and written back from a Spark DataFrame as the same values."""

from __future__ import annotations

import pytest

from airflow_paimon.spark.schema_map import arrow_to_spark_type, spark_to_arrow_type
from airflow_paimon.spark.tables import read_table_df, write_changes
from tests.format.test_nested_types import SCHEMA, by_id, rows

pytestmark = pytest.mark.spark


def test_nested_columns_read_and_write_through_spark(spark, warehouse):
    t = warehouse.create_table("db.nested", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    t.write(rows(range(0, 12), 1))
    df = read_table_df(spark, t)
    assert dict(df.dtypes)["attrs"] == "map<string,bigint>"
    assert dict(df.dtypes)["point"] == "struct<x:int,inner:struct<ys:array<double>>>"
    spark_rows = {r["id"]: r.asDict(recursive=True) for r in df.collect()}
    expected = by_id(rows(range(0, 12), 1))
    for i, r in expected.items():
        r["attrs"] = None if r["attrs"] is None else dict(r["attrs"])
    assert spark_rows == expected

    changed = df.filter("id >= 6").selectExpr("id", "array('new', 'x') as tags", "attrs", "point")
    write_changes(spark, t, changed, kind_column=None)
    after = by_id(t.read())
    assert after[7]["tags"] == ["new", "x"] and after[7]["attrs"] == [("k", 7), ("n", None)]
    assert after[5] == by_id(rows(range(5, 6), 1))[5]
    for f in SCHEMA:
        assert spark_to_arrow_type(arrow_to_spark_type(f.type)) == f.type
