"""MergeIncrementalOperator, CompactOperator and RemoveOrphanFilesOperator: what they submit (no Spark run here;
the DAG test runs them through real spark-submit)."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import types
import zipfile
from pathlib import Path

import pendulum
import pytest

pytestmark = pytest.mark.airflow


@pytest.fixture
def paimon_conn(monkeypatch, tmp_path):
    # The spec folder a submission prepares (and removes once the job ran, which none does here) goes under the
    # test's own folder, not the machine's temporary folder: it holds the connection's keys.
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    wh = str(tmp_path / "wh")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", json.dumps(
        {"conn_type": "paimon", "login": "AKIAX", "password": "s3cr3t", "extra": {"warehouse": wh}}))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    return wh


def context(start="2026-11-14", end="2026-11-15", task_id="merge", try_number=1, run_id="manual__x"):
    ti = types.SimpleNamespace(dag_id="dag", task_id=task_id, map_index=-1, try_number=try_number)
    return {"ti": ti, "data_interval_start": pendulum.parse(start) if start else None,
            "data_interval_end": pendulum.parse(end) if end else None, "run_id": run_id}


def test_merge_operator_submits_the_bundled_app_locally_by_default(paimon_conn):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from airflow_paimon.merge import matched_update, not_matched_insert
    from airflow_paimon.operators.merge import MergeIncrementalOperator
    op = MergeIncrementalOperator(task_id="merge", table="db.t", source="/in/{{ ds }}", on=["id"],
                                  clauses=[matched_update(set="*", condition="s.v > t.v"), not_matched_insert()])
    assert isinstance(op, SparkSubmitOperator)
    assert op.application.endswith("airflow_paimon/spark/merge_app.py") and os.path.exists(op.application)
    assert {"table", "source", "on", "clauses", "reapply", "application_args", "conf"} <= set(op.template_fields)
    assert op.clauses[0] == {"when": "matched", "action": "update", "set": "*", "condition": "s.v > t.v"}
    spec = op._prepare(context())
    hook = op._get_hook()
    assert hook.master == "local[*]"
    assert op.conf["spark.pyspark.python"] == sys.executable
    assert op.env_vars["PYSPARK_PYTHON"] == sys.executable
    assert op.py_files is None                                    # local: the installed package is used
    assert op.application_args[0] == "--spec-file"                 # secrets travel in a file of the job's own
    sent = json.loads(Path(op.application_args[1]).read_text())
    assert sent.pop("options")["s3.secret-key"] == "s3cr3t"
    assert sent == spec and sent["warehouse"] == paimon_conn
    assert not any("s3cr3t" in a for a in op.application_args) and "s3cr3t" not in json.dumps(op.env_vars)
    assert sent["commit_user"] == "airflow:dag.merge"
    # Stable across tries and processes, distinct per interval and task.
    assert op._prepare(context(try_number=3))["commit_identifier"] == sent["commit_identifier"]
    assert op._prepare(context("2026-11-15", "2026-11-16"))["commit_identifier"] != sent["commit_identifier"]
    assert op._prepare(context(task_id="other"))["commit_identifier"] != sent["commit_identifier"]
    op.reapply = "True"
    re = op._prepare(context(try_number=2))
    assert re["reapply"] is True and re["reapply_token"] == "manual__x/2"
    # Another run re-applying the same day is another commit; the same run and try is the same one.
    assert op._prepare(context(try_number=2, run_id="manual__y"))["reapply_token"] != re["reapply_token"]
    assert op._prepare(context(try_number=2))["reapply_token"] == re["reapply_token"]
    assert "driver_bytes" not in sent                              # the application's default
    spark_only = MergeIncrementalOperator(task_id="merge", table="db.t", source="/in", driver_bytes=0)
    assert spark_only._prepare(context())["driver_bytes"] == 0


def test_bad_clauses_fail_when_the_dag_is_parsed():
    from airflow_paimon.merge import MergeClauseError
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    with pytest.raises(MergeClauseError):
        MergeIncrementalOperator(task_id="m", table="db.t", source="x",
                                 clauses=[{"when": "matched", "action": "insert", "values": "*"}])


def test_cluster_master_ships_the_package_as_py_files(paimon_conn, monkeypatch, tmp_path):
    import tempfile

    from airflow_paimon.operators.maintenance import CompactOperator

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))        # the zip cache goes there

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER",
                       json.dumps({"conn_type": "spark", "host": "spark://m", "port": 7077}))
    op = CompactOperator(task_id="compact", table="db.t", conn_id="spark_cluster", partitions={"dt": "2026-11-14"})
    spec = op._prepare(context(task_id="compact"))
    assert op._get_hook().master == "spark://m:7077"
    assert op.py_files and op.py_files.endswith(".zip") and op.py_files.startswith(str(tmp_path))
    names = zipfile.ZipFile(op.py_files).namelist()
    assert "airflow_paimon/spark/merge_app.py" in names and "airflow_paimon/format/table.py" in names
    assert "spark.pyspark.python" not in op.conf                   # the cluster's own Python
    assert spec["partitions"] == [{"dt": "2026-11-14"}] and op.application.endswith("compact_app.py")


def test_orphan_operator_arguments(paimon_conn):
    from airflow_paimon.operators.maintenance import RemoveOrphanFilesOperator, _older_than_args

    assert _older_than_args("3 d") == {"older_than_age": "3 d"}
    assert _older_than_args(dt.timedelta(hours=2)) == {"older_than_age": "2 h"}
    # A point in time goes to the application as epoch millis; without an offset it is UTC.
    utc = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
    assert _older_than_args("2026-11-01T00:00:00") == {"older_than": utc} == _older_than_args(utc)
    assert _older_than_args("2026-11-01T01:00:00+01:00") == {"older_than": utc}
    op = RemoveOrphanFilesOperator(task_id="o", table="db.t", older_than="2 d", dry_run=True)
    spec = op._prepare(context(task_id="o"))
    assert spec == {"target": "db.t", "dry_run": True, "older_than_age": "2 d", "warehouse": paimon_conn}
    assert op.application.endswith("orphans_app.py")


def test_orphan_operator_in_the_worker(paimon_conn):
    import pyarrow as pa

    from airflow_paimon.format import Catalog
    from airflow_paimon.operators.maintenance import RemoveOrphanFilesOperator

    cat = Catalog(paimon_conn)
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64())]), primary_keys=["id"])
    t.write(pa.table({"id": [1, 2]}))
    stray = f"{t.bucket_dir((), 0)}/data-stray.parquet"
    with open(stray, "wb") as f:
        f.write(b"x")
    old = dt.datetime.now().timestamp() - 5 * 86400
    os.utime(stray, (old, old))
    op = RemoveOrphanFilesOperator(task_id="o", table="db.t", use_spark=False)
    out = op.execute(context(task_id="o"))
    assert out["files_freed"] == 1 and not os.path.exists(stray)
    # The XCom the Spark application returns too (see test_compact_orphans): status, paths, counts.
    assert out["status"] == "deleted" and out["files"] == [stray] and out["files_deleted"] == 1
