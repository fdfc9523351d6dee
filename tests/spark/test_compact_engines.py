"""CompactOperator(engine=...): a small table is compacted in the worker, a table over the memory budget on Spark,
and both give the same table and the same XCom shape; a retry finds the landed commit on either engine."""

from __future__ import annotations

import json
import shutil
import types

import pendulum
import pyarrow as pa
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


def context(try_number=1):
    ti = types.SimpleNamespace(dag_id="dag", task_id="compact", map_index=-1, try_number=try_number)
    return {"ti": ti, "data_interval_start": pendulum.parse("2026-11-14"),
            "data_interval_end": pendulum.parse("2026-11-15"), "run_id": "manual__x"}


def use_warehouse(monkeypatch, warehouse):
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT",
                       json.dumps({"conn_type": "paimon", "extra": {"warehouse": warehouse}}))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)


def layout(table):
    """Per bucket: the levels and row counts of its live files."""
    return sorted((s.bucket, sorted((f.level, f.row_count) for f in s.files)) for s in table.plan())


def test_the_worker_and_spark_compact_alike(monkeypatch, tmp_path):
    from airflow_paimon.format import Catalog
    from airflow_paimon.operators.maintenance import CompactOperator

    cat = Catalog(str(tmp_path / "worker"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    for step in range(3):
        t.write(pa.table({"id": list(range(step * 5, step * 5 + 20)), "v": [f"s{step}"] * 20}, schema=SCHEMA))
    t.delete(pa.table({"id": [0, 1]}, schema=pa.schema([SCHEMA.field("id")])))
    shutil.copytree(tmp_path / "worker", tmp_path / "spark")

    use_warehouse(monkeypatch, str(tmp_path / "worker"))
    local = CompactOperator(task_id="compact", table="db.t").execute(context())
    assert local["engine"] == "local" and local["engine_reason"].startswith("fits in the worker: 2 bucket(s)")
    use_warehouse(monkeypatch, str(tmp_path / "spark"))
    remote = CompactOperator(task_id="compact", table="db.t", memory_budget=1).execute(context())
    assert remote["engine"] == "spark" and remote["engine_reason"].startswith("too large for the worker")

    assert local["status"] == remote["status"] == "committed"
    assert set(local) == set(remote)
    assert {k: local[k] for k in ("buckets", "files_before", "files_after", "level", "snapshot_id")} == \
        {k: remote[k] for k in ("buckets", "files_before", "files_after", "level", "snapshot_id")}
    worker, spark = (Catalog(str(tmp_path / name)).get_table("db.t") for name in ("worker", "spark"))
    assert worker.read().sort_by("id").equals(spark.read().sort_by("id"))
    assert layout(worker) == layout(spark) and all(level == 5 for _, fs in layout(worker) for level, _ in fs)
    assert worker.latest_snapshot().commit_kind == spark.latest_snapshot().commit_kind == "COMPACT"

    # A retry finds the landed commit, whichever engine made it; a compacted table needs nothing more.
    again = CompactOperator(task_id="compact", table="db.t", engine="local").execute(context(try_number=2))
    assert (again["status"], again["snapshot_id"]) == ("already_committed", remote["snapshot_id"])
    use_warehouse(monkeypatch, str(tmp_path / "worker"))
    later = dict(context(), run_id="manual__y", data_interval_start=pendulum.parse("2026-11-15"),
                 data_interval_end=pendulum.parse("2026-11-16"))
    nothing = CompactOperator(task_id="compact", table="db.t").execute(later)
    assert (nothing["status"], nothing["engine_reason"]) == ("no_changes", "nothing to compact")
    assert worker.latest_snapshot().id == local["snapshot_id"]
