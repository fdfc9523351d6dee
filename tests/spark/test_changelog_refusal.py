"""The Spark merge application writes no changelog yet: on a table whose changelog-producer asks for one of its
commits, it is refused before it starts a Spark job or writes a file, instead of committing without changelog.
The Spark compaction writes the changelog (tests/spark/test_compact_changelog.py) and is not refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import UnsupportedTableError
from airflow_paimon.spark.merge import run_merge
from tests.format.upkeep_helpers import tree_digest

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def no_spark():
    raise AssertionError("the refusal must come before any Spark session is needed")


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_spark_merge_is_refused_where_it_owes_changelog(tmp_path, producer):
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"changelog-producer": producer})
    t.write(pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([1, 2], pa.int64())}))
    before = tree_digest(t.path)
    merge = {"target": "db.t", "warehouse": wh, "source": str(tmp_path / "missing.parquet"), "on": "id"}
    with pytest.raises(UnsupportedTableError, match=f"changelog-producer is '{producer}'"):
        run_merge(no_spark, merge)
    assert tree_digest(t.path) == before
