"""The operators' OpenLineage facets, built by the real OpenLineage classes from real tables.

Airflow's OpenLineage provider calls ``get_openlineage_facets_on_complete`` after a task ran, which reads the
task's XCom result (the example merge DAG's run checks that path: tests/spark/test_dag_merge.py); here each
operator's facets are built from a given result and a table on disk, without Spark. Without the provider,
importing the operators loads nothing of OpenLineage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog

pytestmark = pytest.mark.airflow

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("note", pa.string())])


def as_json(lineage) -> dict:
    from openlineage.client.serde import Serde

    return {"inputs": [json.loads(Serde.to_json(d)) for d in lineage.inputs],
            "outputs": [json.loads(Serde.to_json(d)) for d in lineage.outputs]}


@pytest.fixture
def orders(warehouse):
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.orders", SCHEMA, primary_keys=["id"],
                         options={"bucket": "2", "tag.automatic-creation": "process-time",
                                  "s3.secret-key": "TOPSECRET"})
    t.write(pa.table({"id": [1, 2, 3], "amount": [1.0, 2.0, 3.0], "note": ["a", "b", "c"]}, schema=SCHEMA))
    return t


def test_a_merge_reports_source_target_schema_version_rows_and_column_lineage(warehouse, orders, tmp_path):
    from airflow_paimon.merge import matched_update, not_matched_insert
    from airflow_paimon.operators import MergeIncrementalOperator

    snap = orders.write(pa.table({"id": [3, 4], "amount": [5.0, 6.0], "note": ["x", "y"]}, schema=SCHEMA))
    op = MergeIncrementalOperator(
        task_id="merge", table="db.orders", source=str(tmp_path / "in"),
        clauses=[matched_update(set={"amount": "s.amount + t.amount", "note": "upper(s.note)"}),
                 not_matched_insert(values="*")])
    got = as_json(op.openlineage_for({"status": "committed", "snapshot_id": snap.id}))
    namespace = "file://" + os.path.abspath(warehouse)
    assert [(d["namespace"], d["name"]) for d in got["inputs"]] == [("file", str(tmp_path / "in"))]
    [out] = got["outputs"]
    assert (out["namespace"], out["name"]) == (namespace, "db.orders")
    assert [(f["name"], f["type"]) for f in out["facets"]["schema"]["fields"]] == [
        ("id", "BIGINT NOT NULL"), ("amount", "DOUBLE"), ("note", "STRING")]
    assert out["facets"]["version"]["datasetVersion"] == str(snap.id)
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 2
    paimon = out["facets"]["paimon"]
    assert paimon["primaryKeys"] == ["id"] and paimon["commitKind"] == "APPEND"
    assert paimon["options"] == {"bucket": "2", "tag.automatic-creation": "process-time"}
    assert "TOPSECRET" not in json.dumps(got)
    lineage = {col: [(f["name"].rsplit("/", 1)[-1], f["field"]) for f in v["inputFields"]]
               for col, v in out["facets"]["columnLineage"]["fields"].items()}
    assert lineage == {"amount": [("in", "amount"), ("db.orders", "amount")], "note": [("in", "note")],
                       "id": [("in", "id")]}


def test_a_tag_reports_its_snapshot_and_name_and_an_export_its_range_and_files(warehouse, orders, tmp_path):
    from airflow_paimon.operators import CreateTagOperator, ExportChangesOperator

    tag = CreateTagOperator(task_id="tag", table="db.orders", tag_name="monday")
    out = as_json(tag.openlineage_for({"tag": "monday", "snapshot_id": 1, "status": "created"}))["outputs"][0]
    assert out["facets"]["paimon"]["tag"] == "monday" and out["facets"]["version"]["datasetVersion"] == "1"
    assert "outputStatistics" not in out.get("outputFacets", {})

    export = ExportChangesOperator(task_id="export", table="db.orders", path=str(tmp_path / "out"), start=0, end=1)
    got = as_json(export.openlineage_for({"end": 1, "rows": 3,
                                          "files": [{"path": "part-0.parquet", "rows": 3}]}))
    assert [(d["name"], d["facets"]["version"]["datasetVersion"]) for d in got["inputs"]] == [("db.orders", "1")]
    [folder] = got["outputs"]
    assert (folder["namespace"], folder["name"]) == ("file", str(tmp_path / "out"))
    assert folder["outputFacets"]["outputStatistics"] == {**folder["outputFacets"]["outputStatistics"],
                                                          "rowCount": 3, "fileCount": 1}


def test_lineage_never_fails_the_task_and_start_names_the_datasets(warehouse, orders):
    from airflow_paimon.operators import ExpireSnapshotsOperator

    start = as_json(ExpireSnapshotsOperator(task_id="e", table="db.orders").get_openlineage_facets_on_start())
    assert [d["name"] for d in start["outputs"]] == ["db.orders"]
    missing = ExpireSnapshotsOperator(task_id="m", table="db.missing")
    assert as_json(missing.get_openlineage_facets_on_failure(None)) == {"inputs": [], "outputs": []}


def test_the_operators_import_nothing_of_openlineage():
    """Lineage is built only when Airflow's OpenLineage provider asks for it: importing the operators and
    sensors loads no OpenLineage code (Airflow's provider registry may read the provider's metadata)."""
    code = ("import sys\n"
            "import airflow_paimon.operators, airflow_paimon.sensors\n"
            "print(sorted(m for m in sys.modules if m.startswith('openlineage')\n"
            "             or (m.startswith('airflow.providers.openlineage') and not m.endswith('get_provider_info')"
            " and m != 'airflow.providers.openlineage')))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "[]"
