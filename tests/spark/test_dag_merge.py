"""The example DAG ``paimon_merge_incremental`` run with ``dag.test()`` through real spark-submit.

Airflow runs in a subprocess with its own AIRFLOW_HOME (SQLite, ``airflow db migrate``); connections come from
``AIRFLOW_CONN_SPARK_DEFAULT`` (``local[2]``) and ``AIRFLOW_CONN_PAIMON_DEFAULT``. Two days are merged -- a
Saturday (no compaction) and a Sunday (compaction and orphan cleanup) -- then the Saturday is run again, which
must change nothing. The runs send their OpenLineage events (Airflow's OpenLineage provider, file transport) to
a file, which is checked too: datasets named as Paimon names them, schema, version, row counts, column lineage.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog

from .reference import canonical, clause, merge_rows

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SCHEMA = pa.schema([("id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()),
                    ("updated_at", pa.timestamp("us"))])
INCOMING = SCHEMA.append(pa.field("op", pa.string()))

RUNNER = r"""
import json, sys
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select

args = json.loads(sys.argv[1])
bag = DagBag(dag_folder=args["dags"])
assert not bag.import_errors, bag.import_errors
dag = bag.dags["paimon_merge_incremental"]
out = []
for when in args["runs"]:
    when, conf = when if isinstance(when, list) else (when, None)
    dr = dag.test(logical_date=pendulum.parse(when), run_conf=conf)
    with create_session() as session:
        session.add(dr)
        states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances(session=session)}
        rows = session.execute(select(XComModel.task_id, XComModel.value).where(
            XComModel.dag_id == dag.dag_id, XComModel.run_id == dr.run_id, XComModel.key == "return_value")).all()
        xcoms = {t: XComModel.deserialize_value(type("X", (), {"value": v})()) for t, v in rows}
    out.append({"run": when, "state": str(dr.state), "tasks": states, "xcoms": xcoms})
print("DAG_TEST_RESULT " + json.dumps(out, default=str))
"""


def _increment(day: int, ids_update, ids_insert, ids_delete) -> pa.Table:
    ts = dt.datetime(2026, 11, day, 12)
    rows = [{"id": i, "customer": f"c{i}-d{day}", "amount": float(i + day), "updated_at": ts, "op": "U"}
            for i in list(ids_update) + list(ids_insert)]
    rows += [{"id": i, "customer": None, "amount": None, "updated_at": ts, "op": "D"} for i in ids_delete]
    return pa.Table.from_pylist(rows, schema=INCOMING)


def _airflow_env(tmp_path: Path, wh: str, incoming: Path) -> dict[str, str]:
    """The environment of an Airflow on SQLite in `tmp_path` (migrated) running the example DAGs on `wh`."""
    home = tmp_path / "airflow"
    home.mkdir()
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_PAIMON_DEFAULT": json.dumps({"conn_type": "paimon", "extra": {"warehouse": wh}}),
        "PAIMON_MERGE_TABLE": "demo.orders_history",
        "PAIMON_MERGE_INCOMING": str(incoming),
        "PAIMON_MERGE_SHUFFLE_PARTITIONS": "2",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "append": True,
                                                       "log_file_path": str(tmp_path / "lineage.jsonl")}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "airflow-paimon-tests",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=600)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    return env


def _run_dag(env: dict[str, str], tmp_path: Path, *runs: str | list) -> list[dict]:
    """``dag.test()`` of the example merge DAG for each run (a logical date, or [logical date, run conf]).

    The run of day D covers [D, D+1): dag.test infers the interval ending at the logical date."""
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps({"dags": str(REPO / "dags"), "runs": runs})],
                          env=env, capture_output=True, text=True, timeout=1500, cwd=str(tmp_path))
    line = next((x for x in proc.stdout.splitlines() if x.startswith("DAG_TEST_RESULT ")), None)
    assert line, proc.stdout[-5000:] + proc.stderr[-8000:]
    return json.loads(line[len("DAG_TEST_RESULT "):])


def _history_table(tmp_path: Path, rows: int) -> tuple[str, Catalog, list[dict]]:
    """The example DAG's historical table, holding `rows` rows as of 2026-11-01: (warehouse, catalog, rows)."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("demo")
    table = cat.create_table("demo.orders_history", SCHEMA, primary_keys=["id"],
                             options={"bucket": "2", "sequence.field": "updated_at"})
    history = [{"id": i, "customer": f"c{i}", "amount": float(i), "updated_at": dt.datetime(2026, 11, 1)}
               for i in range(rows)]
    table.write(pa.Table.from_pylist(history, schema=SCHEMA))
    return wh, cat, history


def test_example_dag_merges_tags_compacts_and_is_backfill_safe(tmp_path):
    wh, cat, history = _history_table(tmp_path, 100)
    incoming = tmp_path / "incoming"
    days = {14: _increment(14, range(0, 20), range(100, 110), range(90, 95)),
            15: _increment(15, range(10, 30), range(110, 115), range(0, 3))}
    for day, data in days.items():
        (incoming / f"2026-11-{day}").mkdir(parents=True)
        pq.write_table(data, incoming / f"2026-11-{day}" / "part-0.parquet")
    env = _airflow_env(tmp_path, wh, incoming)
    run = functools.partial(_run_dag, env, tmp_path)

    saturday, sunday = run("2026-11-15T00:00:00+00:00", "2026-11-16T00:00:00+00:00")
    snapshot_after_sunday = cat.get_table("demo.orders_history").latest_snapshot().id
    (again,) = run("2026-11-15T00:00:00+00:00")

    assert saturday["state"] == "success", saturday
    assert saturday["tasks"]["merge_increment"] == "success" and saturday["tasks"]["tag_day"] == "success"
    assert saturday["tasks"]["compact"] == "skipped" and saturday["tasks"]["expire_snapshots"] == "success"
    assert sunday["state"] == "success", sunday
    assert sunday["tasks"]["compact"] == "success" and sunday["tasks"]["remove_orphan_files"] == "success"
    merge14 = saturday["xcoms"]["merge_increment"]
    assert merge14["status"] == "committed"
    assert merge14["commit_user"] == "airflow:paimon_merge_incremental.merge_increment"

    # The table equals the two MERGEs computed in plain Python.
    clauses = [clause("matched", "delete", lambda s, t: s["op"] == "D"), clause("matched", "update", None, "*"),
               clause("not_matched", "insert", lambda s, t: s["op"] != "D", "*")]
    after14 = merge_rows(history, days[14].to_pylist(), ["id"], clauses, SCHEMA.names, ["updated_at"])
    after15 = merge_rows(after14, days[15].to_pylist(), ["id"], clauses, SCHEMA.names, ["updated_at"])
    t = cat.get_table("demo.orders_history")
    assert canonical(t.read().to_pylist(), ["id"]) == canonical(after15, ["id"])
    # Each day's tag holds the table right after that day's merge.
    tag14 = t.tags.get("2026-11-14")
    assert tag14.snapshot.id == merge14["snapshot_id"]
    assert canonical(t.read(tag="2026-11-14").to_pylist(), ["id"]) == canonical(after14, ["id"])
    assert canonical(t.read(tag="2026-11-15").to_pylist(), ["id"]) == canonical(after15, ["id"])
    # Sunday's compaction: every bucket is one top-level file.
    assert {e.file.level for e in t.file_entries(t.latest_snapshot())} == {5}
    assert sunday["xcoms"]["compact"]["status"] == "committed"
    # Running Saturday again: the day is done; nothing merged, nothing tagged, same snapshots.
    assert again["state"] == "success", again
    assert again["tasks"]["merge_increment"] == "skipped" and again["tasks"]["tag_day"] == "skipped"
    assert cat.get_table("demo.orders_history").latest_snapshot().id == snapshot_after_sunday
    assert canonical(cat.get_table("demo.orders_history").read().to_pylist(), ["id"]) == canonical(after15, ["id"])
    _assert_lineage(tmp_path / "lineage.jsonl", wh, incoming, merge14["snapshot_id"], t)


def _assert_lineage(events_file: Path, wh: str, incoming: Path, merged_snapshot: int, table) -> None:
    """The OpenLineage COMPLETE events of Saturday's merge and tag and Sunday's compaction."""
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    complete = {}
    for e in events:
        if e["eventType"] == "COMPLETE" and "2026-11-14" in json.dumps(e["run"]["facets"].get("airflow", {})):
            complete.setdefault(e["job"]["name"].rsplit(".", 1)[-1], e)
    sunday = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".compact")]
    namespace = "file://" + os.path.abspath(wh)
    merge = complete["merge_increment"]
    [source] = merge["inputs"]
    assert (source["namespace"], source["name"]) == ("file", str(incoming / "2026-11-14"))
    [target] = merge["outputs"]
    assert (target["namespace"], target["name"]) == (namespace, "demo.orders_history")
    facets = target["facets"]
    assert [(f["name"], f["type"]) for f in facets["schema"]["fields"]] == [
        ("id", "BIGINT NOT NULL"), ("customer", "STRING"), ("amount", "DOUBLE"), ("updated_at", "TIMESTAMP(6)")]
    assert facets["version"]["datasetVersion"] == str(merged_snapshot)
    assert facets["paimon"]["primaryKeys"] == ["id"] and facets["paimon"]["options"]["bucket"] == "2"
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == \
        table.snapshot_manager.snapshot(merged_snapshot).delta_record_count
    lineage = facets["columnLineage"]["fields"]
    assert set(lineage) == {"id", "customer", "amount", "updated_at"}
    assert lineage["amount"]["inputFields"] == [
        {"namespace": "file", "name": str(incoming / "2026-11-14"), "field": "amount", "transformations": []}]
    tag = complete["tag_day"]
    assert tag["inputs"] == [] and tag["outputs"][0]["facets"]["paimon"]["tag"] == "2026-11-14"
    assert tag["outputs"][0]["facets"]["version"]["datasetVersion"] == str(merged_snapshot)
    [compacted] = sunday[0]["outputs"]
    assert compacted["facets"]["paimon"]["commitKind"] == "COMPACT"


def test_a_day_reapplied_twice_merges_what_its_files_hold_and_a_day_without_files_is_tagged(tmp_path):
    wh, cat, history = _history_table(tmp_path, 10)
    incoming = tmp_path / "incoming"
    tuesday, wednesday = incoming / "2026-11-17", incoming / "2026-11-18"
    tuesday.mkdir(parents=True)
    wednesday.mkdir()
    (wednesday / "_SUCCESS").write_text("")          # a day without changes: no data file
    pq.write_table(_increment(17, range(0, 3), range(100, 102), []), tuesday / "part-0.parquet")
    run = functools.partial(_run_dag, _airflow_env(tmp_path, wh, incoming), tmp_path)
    reapply = {"reapply": True}

    first, empty_day = run(["2026-11-18T00:00:00+00:00", reapply], "2026-11-19T00:00:00+00:00")
    # A row arrives late in Tuesday's folder; Tuesday is re-applied by a new run.
    pq.write_table(_increment(17, [], [200], []), tuesday / "part-1.parquet")
    (second,) = run(["2026-11-18T00:00:00+00:00", reapply])

    for r in (first, empty_day, second):
        assert r["state"] == "success", r
        assert r["tasks"]["merge_increment"] == "success" and r["tasks"]["tag_day"] == "success", r
    t = cat.get_table("demo.orders_history")
    merged = [first["xcoms"]["merge_increment"], second["xcoms"]["merge_increment"]]
    assert [m["status"] for m in merged] == ["committed", "committed"]
    assert merged[0]["commit_identifier"] != merged[1]["commit_identifier"]
    assert 200 in {r["id"] for r in t.read().to_pylist()}
    assert t.tags.get("2026-11-17").snapshot.id == merged[1]["snapshot_id"]
    # The empty day: no change, no commit, and its tag is made like any day's, on the table as it stood.
    nothing = empty_day["xcoms"]["merge_increment"]
    assert nothing["status"] == "no_changes" and nothing["snapshot_id"] == merged[0]["snapshot_id"]
    assert t.tags.get("2026-11-18").snapshot.id == merged[0]["snapshot_id"]
