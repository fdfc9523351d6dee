"""The merge, compaction and orphan-cleanup applications on a Spark standalone cluster (a master and two workers,
each with a Python that lacks ``airflow_paimon``), submitted by the operators under real Airflow (``dag.test()``):
the tables equal what ``local[2]`` makes of the same inputs, every application ran tasks on both workers, and
pypaimon reads the result. The cluster's warehouse is a local folder, then a bucket on the local S3 server, where
the executors write the data files and the driver commits with conditional writes; both are compared with one
``local[2]`` run on a local folder (a table's snapshots hold the same rows on any store). Last, executors on both
workers race single-row commits to one table on the S3 server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from tests.airflow.test_argument_checks import parse_folder
from tests.cluster.eventlog import read_event_logs
from tests.interop.test_format_interop import canonical, pypaimon_reads

# Ten spark-submits, each starting a JVM: 18 minutes measured (with six) on a 2-core machine busy with other jobs.
pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.airflow, pytest.mark.interop,
              pytest.mark.timeout(2700)]

TABLE = "db.orders"
FIELDS: list[pa.Field] = [pa.field("id", pa.int64()), pa.field("customer", pa.string()),
                          pa.field("amount", pa.float64())]
SCHEMA = pa.schema(FIELDS)
INCOMING = SCHEMA.append(pa.field("op", pa.string()))

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import DAG

    from airflow_paimon.merge import matched_delete, matched_update, not_matched_insert
    from airflow_paimon.operators import CompactOperator, MergeIncrementalOperator, RemoveOrphanFilesOperator

    # Tasks of a job wait for both executors; event logs uncompressed, so the test can read where tasks ran.
    CONF = {"spark.scheduler.minRegisteredResourcesRatio": "1.0", "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": "{{ dag_run.conf['event_log'] }}", "spark.eventLog.compress": "false",
            "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", "spark.executor.memory": "512m",
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}

    def upkeep(dag_id, spark_conn_id, paimon_conn_id):
        spark = {"conn_id": spark_conn_id, "paimon_conn_id": paimon_conn_id, "conf": CONF}
        with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
            merge = MergeIncrementalOperator(
                task_id="merge", table="db.orders", source="{{ dag_run.conf['source'] }}", driver_bytes=0,
                engine="spark",
                clauses=[matched_delete(condition="s.op = 'D'"), matched_update(set="*"),
                         not_matched_insert(values="*", condition="s.op <> 'D'")], **spark)
            compact = CompactOperator(task_id="compact", table="db.orders", engine="spark", **spark)
            orphans = RemoveOrphanFilesOperator(task_id="orphans", table="db.orders", allow_recent=True,
                                                older_than="{{ dag_run.conf['older_than'] }}", **spark)
            merge >> compact >> orphans
        return dag

    on_cluster_file = upkeep("upkeep_on_cluster_file", "spark_cluster", "paimon_cluster_file")
    on_cluster_s3 = upkeep("upkeep_on_cluster_s3", "spark_cluster", "paimon_cluster_s3")
    on_local = upkeep("upkeep_on_local", "spark_local", "paimon_local")
    """
)


@dataclass(frozen=True)
class Store:
    """Where one run's warehouse lives, with the catalog options that open it and the orphan cleanup's
    ``older_than`` that makes the planted stray file eligible."""

    warehouse: str
    options: dict[str, str]
    older_than: str


def stores(tmp_path: Path, s3_server) -> dict[str, Store]:
    """The warehouse of each run. "local" (local[2]) and "cluster_file": local folders that every process of the
    cluster shares; "cluster_s3": a bucket on the local S3 server, reached by the driver and both workers'
    executors with the connection's options alone (the cluster's processes started without any AWS variables).
    An object store dates an object at its upload and cannot backdate it, so there the stray file is made
    eligible with an ``older_than`` in the future."""
    on_disk = {name: Store(str(tmp_path / name), {}, "1 d") for name in ("local", "cluster_file")}
    return {**on_disk, "cluster_s3": Store(f"s3://{s3_server.new_bucket()}/warehouse", s3_server.options(),
                                           "2100-01-01T00:00:00+00:00")}


def history_table(warehouse: str, options: dict[str, str]):
    """db.orders: 60 rows in two commits, two buckets, and a stray file (two days old on a disk) that nothing
    references."""
    cat = Catalog(warehouse, options)
    cat.create_database("db")
    table = cat.create_table(TABLE, SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    for ids in (range(0, 40), range(30, 60)):
        table.write(pa.Table.from_pylist([{"id": i, "customer": f"c{i}", "amount": float(i)} for i in ids],
                                         schema=SCHEMA))
    stray = f"{table.bucket_dir((), 0)}/data-stray.parquet"
    table.io.write_bytes(stray, b"left by a killed job")
    if "://" not in warehouse:
        old = time.time() - 2 * 86400
        os.utime(stray, (old, old))
    return table


def increment(folder: Path) -> str:
    """Updates 0-19, deletes 50-54, inserts 60-69."""
    rows = [{"id": i, "customer": f"c{i}-new", "amount": i + 0.5, "op": "U"} for i in [*range(20), *range(60, 70)]]
    rows += [{"id": i, "customer": None, "amount": None, "op": "D"} for i in range(50, 55)]
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=INCOMING), folder / "part-0.parquet")
    return str(folder)


def run(dag, conf: dict) -> tuple[str, dict[str, str], dict[str, dict]]:
    """One ``dag.test()`` run: its state, its tasks' states and their XCom return values."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    dr = dag.test(run_conf=conf)
    with create_session() as session:
        tis = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dr.dag_id,
                                                         TaskInstance.run_id == dr.run_id)).all()
        rows = session.execute(select(XComModel.task_id, XComModel.value).where(
            XComModel.dag_id == dr.dag_id, XComModel.run_id == dr.run_id, XComModel.key == "return_value")).all()
    xcoms = {task: XComModel.deserialize_value(type("X", (), {"value": value})()) for task, value in rows}
    return str(dr.state), {ti.task_id: str(ti.state) for ti in tis}, xcoms


def snapshots_read(warehouse: str, options: dict[str, str]) -> list[tuple[str, list[dict]]]:
    """Every snapshot of db.orders: its commit kind and its rows."""
    table = Catalog(warehouse, options).get_table(TABLE)
    return [(s.commit_kind, canonical(table.read(snapshot_id=s.id), ["id"])) for s in table.snapshots()]


@pytest.mark.objectstore
def test_upkeep_on_a_standalone_cluster_equals_local(spark_cluster, s3_server, airflow_db, tmp_path, monkeypatch):
    runs = stores(tmp_path, s3_server)
    secrets = {"s3.access-key", "s3.secret-key"}
    for name, store in runs.items():
        extra = {"warehouse": store.warehouse, **{k: v for k, v in store.options.items() if k not in secrets}}
        connection = {"conn_type": "paimon", "extra": extra}
        if store.options:   # the keys as a user keeps them: login and password
            connection.update(login=store.options["s3.access-key"], password=store.options["s3.secret-key"])
        monkeypatch.setenv(f"AIRFLOW_CONN_PAIMON_{name.upper()}", json.dumps(connection))
        history_table(store.warehouse, store.options)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": spark_cluster.port}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    # The driver's Python is the worker's (python3 on PATH); the executors' is the nodes' own.
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "upkeep.py").write_text(DAG_FILE)
    dags = parse_folder(tmp_path / "dags").dags
    source = increment(tmp_path / "incoming")

    results = {}
    for name, store in runs.items():
        events = tmp_path / f"events-{name}"
        events.mkdir()
        results[name] = run(dags[f"upkeep_on_{name}"], {"source": source, "event_log": str(events),
                                                         "older_than": store.older_than})
    for name, (state, tasks, _) in results.items():
        assert state == "success", (name, tasks)
    local = snapshots_read(runs["local"].warehouse, {})
    assert [kind for kind, _ in local] == ["APPEND", "APPEND", "APPEND", "COMPACT"]   # two writes, merge, compaction
    latest = {r["id"]: r for r in local[-1][1]}
    assert sorted(latest) == [*range(50), *range(55, 70)] and latest[3]["customer"] == "c3-new"
    workers = {w.webui_port for w in spark_cluster.workers}
    completed = {a["name"] for a in spark_cluster.master_state()["completedapps"]}

    for name in ("cluster_file", "cluster_s3"):
        store, ours = runs[name], results[name][2]
        for task in ("merge", "compact"):
            assert ours[task]["status"] == results["local"][2][task]["status"] == "committed", (name, task)
        assert ours["orphans"]["files_deleted"] == results["local"][2]["orphans"]["files_deleted"] == 1, name
        # The same table, snapshot by snapshot.
        snapshots = snapshots_read(store.warehouse, store.options)
        assert snapshots == local, name

        # Every application ran on the cluster, with tasks on both workers' executors and none failed.
        apps = read_event_logs(tmp_path / f"events-{name}")
        assert sorted(a.name for a in apps) == [f"paimon-{app}-{TABLE}" for app in ("compact", "merge",
                                                                                     "remove-orphans")]
        for app in apps:
            assert set(app.succeeded) == workers and not app.failed, (name, app)
        assert {a.name for a in apps} <= completed

        # pypaimon reads every snapshot the cluster wrote as the library does.
        reads = pypaimon_reads(store.warehouse, TABLE, [{"snapshot": s} for s in range(1, len(snapshots) + 1)],
                               tmp_path / f"pypaimon-{name}", store.options)
        assert [canonical(t.select(SCHEMA.names), ["id"]) for t in reads] == [rows for _, rows in snapshots], name


RACERS, COMMITS_EACH = 2, 12


@pytest.mark.objectstore
def test_executors_on_both_workers_race_commits_to_one_s3_table(spark_cluster, s3_server, tmp_path):
    """Commits from executors of different workers race for the same snapshot ids on the S3 server, the driver a
    ``spark-submit`` of its own: every commit an executor saw land is in the table exactly once, under a snapshot
    id that is that executor's commit."""
    from airflow_paimon.spark.common import py_files_zip

    warehouse, options = f"s3://{s3_server.new_bucket()}/wh", s3_server.options()
    catalog = Catalog(warehouse, options)
    catalog.create_database("db")
    catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("racer", pa.int64())]), primary_keys=["id"],
                         options={"bucket": "1"})
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"warehouse": warehouse, "options": options, "racers": RACERS,
                               "commits": COMMITS_EACH, "result": str(tmp_path / "landed.json")}))
    # The driver runs this environment's Python; the executors the nodes' own (python3 first on their PATH).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    submit = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", spark_cluster.url,
         "--py-files", py_files_zip(), "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
         "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s", "--conf", "spark.executor.memory=512m",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
         "--conf", "spark.driver.bindAddress=127.0.0.1", str(Path(__file__).parent / "racing_commits.py"), str(job)],
        env=env, capture_output=True, text=True, timeout=900)
    assert submit.returncode == 0, submit.stderr[-4000:]
    landed = json.loads((tmp_path / "landed.json").read_text())

    assert {c["worker"] for c in landed} == {str(spark_cluster.root / f"worker-{n}") for n in range(2)}
    assert len(landed) == RACERS * COMMITS_EACH
    table = catalog.get_table("db.t")
    ids = table.read().column("id").to_pylist()
    lost = sorted({c["key"] for c in landed} - set(ids))
    order = [s.commit_user for s in table.snapshots()]
    turns = sum(a != b for a, b in zip(order, order[1:], strict=False))
    print(f"racing commits on the cluster: {len(landed)} landed, the committer changed {turns} times in "
          f"{len(order)} snapshots, {sum(c['conflicts'] for c in landed)} CommitConflictErrors retried, "
          f"{len(lost)} lost")
    assert lost == [] and sorted(ids) == sorted(c["key"] for c in landed)   # each exactly once
    # Each snapshot id an executor was told it got is that executor's commit, and no id was told twice.
    users = {s.id: s.commit_user for s in table.snapshots()}
    assert len({c["snapshot"] for c in landed}) == len(landed)
    assert all(users[c["snapshot"]] == f"racer-{c['key'] // 1000}" for c in landed)
