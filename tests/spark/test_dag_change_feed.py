"""The example DAG ``paimon_change_feed`` under real Airflow (``dag.test()`` on SQLite) and real spark-submit.

The source table changes on four days and is tagged each day, as its own pipeline would. Each run merges the day's
source changes into a ``changelog-producer = lookup`` table, tags it, exports its changes of the day, and propagates
them into a replica through a consumer. The exported files of each day must equal a plain-Python model of what
that day's MERGE changed (lookup semantics: +I for a new key, -U/+U for a changed one, -D for a deleted one that
existed, nothing for deleting an absent key); the replica must end equal to the changelog table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.spark.merge.feed import FEED_PROPERTY

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.string())])

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
dag = bag.dags["paimon_change_feed"]
for task in dag.tasks:
    task.retries = 0
out = []
for when in args["runs"]:
    dr = dag.test(logical_date=pendulum.parse(when))
    with create_session() as session:
        session.add(dr)
        states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances(session=session)}
        rows = session.execute(select(XComModel.task_id, XComModel.value).where(
            XComModel.dag_id == dag.dag_id, XComModel.run_id == dr.run_id, XComModel.key == "return_value")).all()
        xcoms = {t: XComModel.deserialize_value(type("X", (), {"value": v})()) for t, v in rows}
    out.append({"run": when, "state": str(dr.state), "tasks": states, "xcoms": xcoms})
print("DAG_TEST_RESULT " + json.dumps(out, default=str))
"""

# What the source's own pipeline does on each day: upserts {id: value} and deletes [id].
BASELINE = {1: "a", 2: "b", 3: "c"}
DAYS = {
    "2026-11-10": ({4: "d", 5: "e", 1: "a1"}, []),
    "2026-11-11": ({4: "d1", 7: "g"}, [2, 7]),          # 7 inserted and deleted the same day: no change
    "2026-11-12": ({1: "a2", 6: "f", 3: "c1"}, [5]),
    "2026-11-13": ({6: "f1", 8: "h"}, [1, 3]),
}


def airflow_env(tmp_path: Path, wh: str, exports: Path) -> dict[str, str]:
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
        "PAIMON_CHANGE_FEED_EXPORT_PATH": str(exports),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=600)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    return env


def run_days(env: dict[str, str], tmp_path: Path, days: list[str]) -> list[dict]:
    """``dag.test()`` for each day D (logical date D+1: the run covers [D, D+1))."""
    import datetime as dt

    runs = [(dt.date.fromisoformat(d) + dt.timedelta(days=1)).isoformat() + "T00:00:00+00:00" for d in days]
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps({"dags": str(REPO / "dags"), "runs": runs})],
                          env=env, capture_output=True, text=True, timeout=2700, cwd=str(tmp_path))
    line = next((x for x in proc.stdout.splitlines() if x.startswith("DAG_TEST_RESULT ")), None)
    assert line, proc.stdout[-5000:] + proc.stderr[-8000:]
    return json.loads(line[len("DAG_TEST_RESULT "):])


def model_changes(cdc: dict[int, str], src_before: dict[int, str], src_after: dict[int, str]) -> list[tuple]:
    """What one day's MERGE changes in the lookup table `cdc` (updated in place): the source's net change of the
    day (between its two tags), deletes deleting and the rest upserting."""
    out = []
    for key in sorted(set(src_before) | set(src_after)):
        if src_before.get(key) == src_after.get(key):
            continue
        if key not in src_after:
            if key in cdc:
                out.append((key, cdc.pop(key), "delete"))
        elif key in cdc:
            out += [(key, cdc[key], "update_preimage"), (key, src_after[key], "update_postimage")]
            cdc[key] = src_after[key]
        else:
            out.append((key, src_after[key], "insert"))
            cdc[key] = src_after[key]
    return sorted(out)


def exported(folder: Path) -> list[tuple]:
    # Imported here: make test-fast collects this module, and the operator module imports Airflow.
    from airflow_paimon.operators.changes import MARKER

    manifest = json.loads((folder / MARKER).read_text())
    rows = pa.concat_tables([pq.read_table(folder / f["path"]) for f in manifest["files"]]).to_pylist()
    return sorted((r["id"], r["value"], r["_change_type"]) for r in rows)


def table_rows(table) -> dict[int, str]:
    return {r["id"]: r["value"] for r in table.read().to_pylist()}


@pytest.mark.timeout(3000)   # eight spark-submits, then two runs without any
def test_three_days_of_merges_into_a_lookup_table_export_exactly_what_each_merge_changed(tmp_path):
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("demo")
    source = cat.create_table("demo.orders", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    cdc = cat.create_table("demo.orders_cdc", SCHEMA, primary_keys=["id"],
                           options={"bucket": "2", "changelog-producer": "lookup"})
    replica = cat.create_table("demo.orders_replica", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    cdc.consumers.create("replica")
    state = dict(BASELINE)
    source.write(pa.table({"id": list(state), "value": list(state.values())}, schema=SCHEMA))
    source.create_tag("2026-11-09")
    states = {"2026-11-09": dict(state)}
    for day, (upserts, deletes) in DAYS.items():
        source.write(pa.table({"id": list(upserts), "value": list(upserts.values())}, schema=SCHEMA))
        if deletes:
            source.delete(pa.table({"id": pa.array(deletes, pa.int64())}))
        state.update(upserts)
        for key in deletes:
            state.pop(key, None)
        source.create_tag(day)
        states[day] = dict(state)
    exports = tmp_path / "exports"

    env = airflow_env(tmp_path, wh, exports)
    results = run_days(env, tmp_path, list(DAYS))

    model: dict[int, str] = {}
    previous = "2026-11-09"
    for day, result in zip(DAYS, results):
        assert result["state"] == "success", result
        merge = result["xcoms"]["merge_day"]
        assert merge["status"] == "committed", merge
        want = model_changes(model, states[previous], states[day])
        got = exported(exports / "demo.orders_cdc" / day)
        if day == "2026-11-10":
            assert got == []   # the table's first tag: no earlier one, so the period is empty, as Paimon answers
        else:
            assert got == want, day
        previous = day
    assert table_rows(cdc) == model
    assert table_rows(replica) == table_rows(cdc)
    assert cdc.consumers.get("replica") == cdc.latest_snapshot().id + 1
    propagated = [r["xcoms"]["propagate"] for r in results]
    assert [p["status"] for p in propagated] == ["committed"] * 4
    assert len({p["commit_identifier"] for p in propagated}) == 4

    # Re-runs need no Spark: a merged day's commit is found (its consumer moved past what that commit applied, as
    # after a kill between the commit and the advance) and a consumer with nothing new reads an empty range; both
    # finish in the worker with the application's result (engine "local": the application would say "driver").
    last = cdc.snapshot(results[-1]["xcoms"]["merge_day"]["snapshot_id"])
    applied = json.loads(replica.latest_snapshot().properties[FEED_PROPERTY])
    cdc.consumers.reset("replica", applied["start"] + 1)
    snapshots = (len(cdc.snapshots()), len(replica.snapshots()))
    again = run_days(env, tmp_path, ["2026-11-13", "2026-11-12"])
    assert [r["state"] for r in again] == ["success", "success"], again
    merges = [r["xcoms"]["merge_day"] for r in again]
    assert [(m["status"], m["engine"]) for m in merges] == [("already_committed", "local")] * 2, merges
    assert merges[0]["snapshot_id"] == last.id
    assert merges[0]["engine_reason"] == "the change feed's commit already landed"
    # 2026-11-13's propagate finds the commit of the range its consumer was moved back to, and moves it on again;
    # then 2026-11-12's finds nothing new.
    first, second = (r["xcoms"]["propagate"] for r in again)
    assert (first["status"], first["engine"], first["snapshot_id"]) == \
        ("already_committed", "local", replica.latest_snapshot().id), first
    assert (second["status"], second["engine"], second["engine_reason"]) == \
        ("no_changes", "local", "the change feed's range is empty"), second
    assert cdc.consumers.get("replica") == applied["end"] + 1 == cdc.latest_snapshot().id + 1
    assert (len(cdc.snapshots()), len(replica.snapshots())) == snapshots
    assert table_rows(replica) == table_rows(cdc) == model
