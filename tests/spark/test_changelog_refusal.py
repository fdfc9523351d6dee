"""The Spark merge and compaction applications write no changelog yet: on a table whose changelog-producer asks for
one, they are refused before they start a Spark job or write a file, instead of committing without changelog."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import UnsupportedTableError
from airflow_paimon.spark.compact_app import run_compaction
from airflow_paimon.spark.merge import run_merge
from tests.format.upkeep_helpers import tree_digest

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def no_spark():
    raise AssertionError("the refusal must come before any Spark session is needed")


@pytest.mark.parametrize("producer,merge_refused,compaction_refused", [
    ("input", True, False), ("lookup", True, True), ("full-compaction", False, True)])
def test_spark_applications_are_refused_where_they_owe_changelog(tmp_path, producer, merge_refused,
                                                                  compaction_refused):
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"changelog-producer": producer})
    t.write(pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([1, 2], pa.int64())}))
    before = tree_digest(t.path)
    merge = {"target": "db.t", "warehouse": wh, "source": str(tmp_path / "missing.parquet"), "on": "id"}
    if merge_refused:
        with pytest.raises(UnsupportedTableError, match=f"changelog-producer is '{producer}'"):
            run_merge(no_spark, merge)
    if compaction_refused:
        with pytest.raises(UnsupportedTableError, match=f"changelog-producer is '{producer}'"):
            run_compaction(None, {"target": "db.t", "warehouse": wh})
    assert tree_digest(t.path) == before
