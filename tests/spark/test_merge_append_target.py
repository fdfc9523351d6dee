"""The Spark merge application into an append table with deletion vectors: Spark reads the source (here CSV, which
the in-process engine does not read), the driver merges it as the in-process engine does, marking the changed
rows in deletion vectors; the same MERGE in process on a copy of the table gives the same rows. Without deletion
vectors the application refuses and writes nothing."""

from __future__ import annotations

import shutil
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import InvalidDataError
from airflow_paimon.local_merge.engine import merge_in_process
from airflow_paimon.merge import matched_delete, matched_update, not_matched_by_source_update, not_matched_insert
from airflow_paimon.spark.merge import run_merge

from ..format.upkeep_helpers import tree_digest

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
TARGET = pa.table({"id": pa.array([1, 1, 2, 3, 4], pa.int64()), "p": ["x", "y", "x", "y", "x"],
                   "v": pa.array([10, 11, 20, 30, 40], pa.int64())}, schema=SCHEMA)
CLAUSES = [matched_delete(condition="s.v < 0"), matched_update(set={"v": "t.v + s.v"}), not_matched_insert(),
           not_matched_by_source_update(set={"v": "0"}, condition="t.p = 'y'")]


def live(t) -> Counter:
    return Counter((r["id"], r["p"], r["v"]) for r in t.read().to_pylist())


def test_the_application_merges_an_append_target_in_its_driver(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    cat.create_table("db.t", SCHEMA, partition_keys=["p"], options={"deletion-vectors.enabled": "true"}) \
        .write(TARGET)
    shutil.copytree(tmp_path / "wh", tmp_path / "copy")
    csv = tmp_path / "day.csv"
    csv.write_text("id,p,v\n1,x,5\n2,x,-1\n9,y,90\n")
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": str(csv), "source_format": "csv",
            "source_options": {"header": "true", "inferSchema": "true"}, "on": ["id"], "clauses": CLAUSES,
            "commit_user": "u", "commit_identifier": 7}
    got = run_merge(spark, spec)
    assert got["status"] == "committed" and got["engine"] == "driver"
    assert got["rows"] == {"inserted": 1, "updated": 3, "deleted": 1}
    copy = Catalog(str(tmp_path / "copy")).get_table("db.t")
    merge_in_process(copy, pa.table({"id": pa.array([1, 2, 9], pa.int32()), "p": ["x", "x", "y"],
                                     "v": pa.array([5, -1, 90], pa.int32())}), CLAUSES, on=["id"])
    t = cat.get_table("db.t")
    assert live(t) == live(copy) == Counter({(1, "x", 15): 1, (1, "y", 16): 1, (3, "y", 0): 1, (4, "x", 40): 1,
                                             (9, "y", 90): 1})
    assert run_merge(spark, spec)["status"] == "already_committed"


def test_an_append_target_without_deletion_vectors_is_refused(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    cat.create_table("db.plain", SCHEMA).write(TARGET)
    before = tree_digest(cat.get_table("db.plain").path)
    source = tmp_path / "s.parquet"
    pq.write_table(TARGET, source)
    with pytest.raises(InvalidDataError, match="needs deletion vectors"):
        run_merge(spark, {"target": "db.plain", "warehouse": cat.warehouse, "source": str(source), "on": ["id"]})
    assert tree_digest(cat.get_table("db.plain").path) == before
