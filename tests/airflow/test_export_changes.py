"""ExportChangesOperator under real Airflow (``dag.test()`` on SQLite): a period, an explicit range and a consumer
exported as Parquet folders completed by a ``_SUCCESS`` manifest; re-runs replace; a failed export leaves the
consumer where it was; bad arguments are DAG import errors."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections import Counter
from pathlib import Path

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.arguments import ArgumentError
from airflow_paimon.format import Catalog
from airflow_paimon.operators.changes import MARKER, ExportChangesOperator
from tests.airflow.test_dags import dag_for_test, run_dag
from tests.e2e.tables import commit_at, commit_clock, connection_json, create_table
from tests.s3_server import s3_server  # noqa: F401  (the S3 server fixture)

pytestmark = pytest.mark.airflow

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import DAG

    from airflow_paimon.operators import ExportChangesOperator

    def export_dag(dag_id, table="demo.orders", **kwargs):
        with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
            ExportChangesOperator(task_id="export", table=table, path="{{ dag_run.conf['path'] }}", **kwargs)
        return dag

    export_range = export_dag("export_range", start="{{ dag_run.conf['start'] }}", end="{{ dag_run.conf['end'] }}",
                              max_rows_per_file="{{ dag_run.conf.get('max_rows', 1000) }}")
    export_consumer = export_dag("export_consumer", consumer_id="{{ dag_run.conf['consumer'] }}", mode="delta")
    WIDE = dict(table="demo.wide", start="{{ dag_run.conf['start'] }}", end="{{ dag_run.conf['end'] }}", mode="delta",
                max_rows_per_file="{{ dag_run.conf.get('max_rows', 1000) }}")
    export_engine = export_dag("export_engine", engine="{{ dag_run.conf['engine'] }}", **WIDE)
    export_auto_tiny_budget = export_dag("export_auto_tiny_budget", memory_budget=1, **WIDE)
    """
)


def utc(year: int, month: int, day: int, hour: int = 0) -> pendulum.DateTime:
    return pendulum.datetime(year, month, day, hour, tz="UTC")


@pytest.fixture
def table(tmp_path, monkeypatch):
    """demo.orders: 11-01 inserts 1, 2, 3; 11-02 updates 2 and inserts 4; 11-03 deletes 1 (one commit a day)."""
    path = str(tmp_path / "wh")
    Catalog(path).create_database("demo")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", connection_json(path))
    t = create_table(path, "demo.orders")
    commit_at(t, utc(2026, 11, 1, 12), 1, 2, 3)
    commit_at(t, utc(2026, 11, 2, 12), 2, 4, label="w")
    with commit_clock(utc(2026, 11, 3, 12)):
        t.delete(pa.table({"id": pa.array([1], pa.int64())}))
    return t


@pytest.fixture
def export_dags(airflow_db, tmp_path):
    """The DAGs of DAG_FILE, parsed and stored as the DAG processor would."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "export_dags.py").write_text(DAG_FILE)
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags


def run(dag, conf: dict) -> tuple[str, dict | None]:
    """One ``dag.test()`` run: the export task's state and its XCom return value."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    dr = dag.test(run_conf=conf)
    with create_session() as session:
        state = session.scalar(select(TaskInstance.state).where(TaskInstance.dag_id == dr.dag_id,
                                                                 TaskInstance.run_id == dr.run_id))
        value = session.scalar(select(XComModel.value).where(
            XComModel.dag_id == dr.dag_id, XComModel.run_id == dr.run_id, XComModel.key == "return_value"))
    result = XComModel.deserialize_value(type("X", (), {"value": value})()) if value is not None else None
    return str(state), result


def exported(folder: Path) -> pa.Table:
    """The folder's rows, read as a reader should: only a complete folder, only the files its manifest lists."""
    manifest = json.loads((folder / MARKER).read_text())
    tables = [pq.read_table(folder / f["path"]) for f in manifest["files"]]
    for t, f in zip(tables, manifest["files"]):
        assert t.num_rows == f["rows"]
    return pa.concat_tables(tables)


def rows(t: pa.Table) -> list[tuple]:
    return sorted((r["id"], r["value"], r["_change_type"], r["_commit_version"]) for r in t.to_pylist())


@pytest.mark.parametrize("days", [(1, 2, 3), (3, 1, 2)], ids=["in-order", "out-of-order"])
def test_export_of_the_runs_period_after_its_tag(days, table, airflow_db, tmp_path, monkeypatch):
    """The example DAG: each period's folder holds what changed from the previous period's tag to its own, also when
    a later period runs before the earlier one is tagged (then from the snapshot that tag will hold)."""
    root = tmp_path / "exports"
    monkeypatch.setenv("PAIMON_EXPORT_PATH", str(root))
    dag = dag_for_test("paimon_export_changes")
    for day in days:
        state, states = run_dag(dag, utc(2026, 11, day + 1))
        assert state == "success", states
    assert [t.name for t in table.tags.list()] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    first = root / "demo.orders" / "2026-11-01"
    assert exported(first).num_rows == 0  # no earlier periodic tag: empty, as Paimon's incremental-to-auto-tag
    for day in (2, 3):
        got = exported(root / "demo.orders" / f"2026-11-0{day}")
        want = table.changes(f"2026-11-0{day - 1}", f"2026-11-0{day}").read_all()
        assert rows(got) == rows(want) and got.schema == want.schema
    manifest = json.loads((root / "demo.orders" / "2026-11-02" / MARKER).read_text())
    assert manifest["counts"] == {"insert": 1, "update_postimage": 1, "update_preimage": 1}
    assert (manifest["end"], manifest["mode"]) == ("2026-11-02", "diff")
    # in order from the tag; out of order, day 3 ran before day 2 was tagged: from the snapshot that tag holds
    assert json.loads((root / "demo.orders" / "2026-11-03" / MARKER).read_text())["start"] == \
        ("2026-11-02" if days == (1, 2, 3) else 2)


def test_export_of_an_explicit_range_counts_in_xcom_and_marker_last(table, export_dags, tmp_path):
    folder = tmp_path / "out" / "range"
    state, result = run(export_dags["export_range"], {"path": str(folder), "start": "1", "end": "3", "max_rows": 2})
    assert state == "success"
    want = table.changes(1, 3).read_all()
    got = exported(folder)
    assert rows(got) == rows(want)
    assert result is not None
    assert result["counts"] == dict(Counter(want.column("_change_type").to_pylist())) and len(result["counts"]) > 1
    assert result["rows"] == want.num_rows == 3 and [f["rows"] for f in result["files"]] == [2, 1]
    assert json.loads((folder / MARKER).read_text())["files"] == result["files"]
    marker_time = (folder / MARKER).stat().st_mtime_ns
    assert all(p.stat().st_mtime_ns <= marker_time for p in folder.glob("part-*.parquet"))


def test_rerun_replaces_the_folder(table, export_dags, tmp_path):
    folder = tmp_path / "out" / "range"
    conf = {"path": f"file://{folder}", "start": "1", "end": "3"}  # a URI goes through the library's FileIO
    assert run(export_dags["export_range"], {**conf, "max_rows": 1})[0] == "success"
    assert len(list(folder.glob("part-*.parquet"))) == 3
    state, result = run(export_dags["export_range"], {**conf, "max_rows": 10})
    assert state == "success" and result is not None
    assert sorted(p.name for p in folder.iterdir()) == ["_SUCCESS", "part-00000.parquet"]
    assert rows(pq.read_table(folder)) == rows(table.changes(1, 3).read_all())  # the whole folder, no duplicates


def test_a_folder_holding_other_files_is_refused_untouched(table, export_dags, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    state, _ = run(export_dags["export_range"], {"path": str(folder), "start": "1", "end": "3"})
    assert state == "failed"
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_consumer_export_advances_only_after_the_folder_is_complete(table, export_dags, tmp_path):
    table.consumers.create("exporter", 2)
    dag = export_dags["export_consumer"]
    # a data file of snapshot 3 is missing: the export fails midway, the consumer stays and the folder has no marker
    data_files = sorted(Path(table.path).glob("bucket-*/data-*.parquet"), key=os.path.getmtime)
    last = data_files[-1]  # the delete of snapshot 3
    aside = tmp_path / "aside.parquet"
    shutil.move(last, aside)
    state, _ = run(dag, {"path": str(tmp_path / "c1"), "consumer": "exporter"})
    assert state == "failed"
    assert table.consumers.get("exporter") == 2
    assert not (tmp_path / "c1" / MARKER).exists()
    shutil.move(aside, last)

    state, result = run(dag, {"path": str(tmp_path / "c1"), "consumer": "exporter"})
    assert state == "success" and result is not None
    assert table.consumers.get("exporter") == 4
    assert rows(exported(tmp_path / "c1")) == rows(table.changes(1, 3, mode="delta").read_all())
    assert result["counts"] == {"delete": 1, "insert": 2}

    commit_at(table, utc(2026, 11, 4, 12), 7)
    state, result = run(dag, {"path": str(tmp_path / "c2"), "consumer": "exporter"})
    assert state == "success" and result is not None
    assert rows(exported(tmp_path / "c2")) == [(7, "v7", "insert", 4)]
    assert table.consumers.get("exporter") == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give exactly one range"),
        ({"period": True, "start": 3}, "got period and start"),
        ({"start": 1, "consumer_id": "c"}, "got start and consumer_id"),
        ({"period": True, "end": 4}, "end: only with start"),
        ({"consumer_id": "no/slash"}, "consumer_id"),
        ({"start": 1, "mode": "incremental"}, "mode"),
        ({"start": 1, "columns": "id"}, "columns"),
        ({"start": 1, "max_rows_per_file": 0}, "max_rows_per_file"),
        ({"start": 1, "path": None}, "path"),
        ({"period": "yes"}, "period"),
        ({"start": 1, "engine": "flink"}, "engine"),
        ({"start": 1, "memory_budget": -1}, "memory_budget"),
    ],
)
def test_bad_arguments_are_refused_at_parse_time(kwargs, message):
    arguments = {"task_id": "export", "table": "demo.orders", "path": "/tmp/x", **kwargs}
    with pytest.raises(ArgumentError, match=message):
        ExportChangesOperator(**arguments)


@pytest.fixture
def wide(table):
    """demo.wide: 4 buckets, four commits of inserts, updates and deletes (many files to spread over tasks)."""
    t = create_table(str(Path(table.path).parents[1]), "demo.wide", {"bucket": "4"})
    commit_at(t, utc(2026, 11, 1, 12), *range(40))
    commit_at(t, utc(2026, 11, 2, 12), *range(20, 60), label="w")
    with commit_clock(utc(2026, 11, 3, 12)):
        t.delete(pa.table({"id": pa.array(range(0, 60, 3), pa.int64())}))
    commit_at(t, utc(2026, 11, 4, 12), *range(50, 70), label="x")
    return t


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.spark
def test_the_spark_engine_exports_what_the_worker_exports(wide, export_dags, tmp_path):
    """Real spark-submit: the same rows in the same order as the worker's export of the range, the same XCom
    shape and manifest; a re-run replaces the folder."""
    dag = export_dags["export_engine"]
    conf = {"start": "0", "end": "4", "max_rows": 7}
    state, here = run(dag, {**conf, "path": str(tmp_path / "local"), "engine": "local"})
    assert state == "success" and here is not None
    folder = tmp_path / "spark"
    state, remote = run(dag, {**conf, "path": f"file://{folder}", "engine": "spark"})
    assert state == "success" and remote is not None
    assert (here["engine"], here["engine_reason"]) == ("local", "engine='local'")
    assert (remote["engine"], remote["engine_reason"]) == ("spark", "engine='spark'")
    assert set(here) == set(remote)
    assert {k: here[k] for k in ("table", "start", "end", "mode", "rows", "counts", "consumer")} == \
        {k: remote[k] for k in ("table", "start", "end", "mode", "rows", "counts", "consumer")}
    want = wide.changes(0, 4, mode="delta").read_all()
    assert here["rows"] == want.num_rows == 120 and set(here["counts"]) == {"insert", "delete"}
    spark_rows = exported(folder)
    assert spark_rows.equals(exported(tmp_path / "local")) and spark_rows.equals(want)  # in the feed's order
    assert len({f["path"].split("-")[1] for f in remote["files"]}) > 1  # several tasks wrote
    assert all(f["rows"] <= 7 for f in remote["files"])
    assert json.loads((folder / MARKER).read_text())["files"] == remote["files"]
    assert listing(folder) == sorted([MARKER] + [f["path"] for f in remote["files"]])

    state, again = run(dag, {**conf, "path": str(folder), "engine": "spark", "max_rows": 1000})
    assert state == "success" and again is not None
    assert listing(folder) == sorted([MARKER] + [f["path"] for f in again["files"]])
    assert len(again["files"]) < len(remote["files"])
    assert pq.read_table(folder).num_rows == want.num_rows  # the whole folder: replaced, no duplicates
    assert exported(folder).equals(want)


@pytest.mark.spark
@pytest.mark.objectstore
def test_both_engines_export_to_an_object_store(wide, export_dags, s3_server, monkeypatch):  # noqa: F811
    """The folder is an S3 URI, written with the connection's filesystem options by the worker and by Spark's
    tasks (the library's file IO on the local S3 server)."""
    from airflow_paimon.format.fileio import FileIO

    extra = {"warehouse": str(Path(wide.path).parents[1]), **s3_server.options()}
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", json.dumps({"conn_type": "paimon", "extra": extra}))
    root = f"s3://{s3_server.new_bucket()}/exports"
    io = FileIO(root, s3_server.options())
    got = {}
    for engine in ("local", "spark"):
        folder = f"{root}/{engine}"
        state, result = run(export_dags["export_engine"], {"start": "1", "end": "4", "max_rows": 9,
                                                            "path": folder, "engine": engine})
        assert state == "success" and result is not None and result["engine"] == engine
        listed = json.loads(io.read_text(f"{folder}/{MARKER}"))["files"]
        assert listed == result["files"]
        got[engine] = pa.concat_tables([pq.read_table(io.fs_path(f"{folder}/{f['path']}"), filesystem=io.fs)
                                        for f in listed])
    assert got["spark"].equals(got["local"]) and got["local"].equals(wide.changes(1, 4, mode="delta").read_all())


@pytest.mark.spark
def test_auto_picks_the_engine_by_the_memory_budget(wide, export_dags, tmp_path):
    conf = {"start": "1", "end": "3"}
    state, small = run(export_dags["export_engine"], {**conf, "path": str(tmp_path / "a"), "engine": "auto"})
    assert state == "success" and small is not None
    assert small["engine"] == "local" and small["engine_reason"].startswith("fits in the worker: the range reads")
    state, large = run(export_dags["export_auto_tiny_budget"], {**conf, "path": str(tmp_path / "b")})
    assert state == "success" and large is not None
    assert large["engine"] == "spark" and large["engine_reason"].startswith("too large for the worker")
    assert exported(tmp_path / "a").equals(exported(tmp_path / "b"))
    assert small["counts"] == large["counts"] == {"delete": 20, "insert": 40}


def test_templates_are_checked_once_rendered():
    op = ExportChangesOperator(task_id="export", table="demo.orders", path="/tmp/x", start="{{ params.s }}",
                               consumer_id="{{ params.c }}")
    op.start, op.consumer_id = "4", "c"
    with pytest.raises(ArgumentError, match="got start and consumer_id"):
        op.check_arguments(rendered=True)
    op.consumer_id = ""  # a blank rendered template is "not given"
    op.check_arguments(rendered=True)
