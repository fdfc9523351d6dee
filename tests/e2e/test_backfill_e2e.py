"""End to end: real Airflow (``airflow standalone`` on SQLite), a backfill created through the REST API, the
tags it makes, a deferred TagTimeSensor resumed by the triggerer, a downstream DAG scheduled on the table's asset,
and TagTimeSensors (deferrable and poking) started before their table exists.

What runs: ``airflow standalone`` (scheduler, DAG processor, API server and triggerer; LocalExecutor) in a
temporary AIRFLOW_HOME, with this repository's ``dags/`` folder and ``paimon_default`` given by
``AIRFLOW_CONN_PAIMON_DEFAULT``. The test logs in as the UI does with the simple auth manager (``POST
/auth/token`` with the admin password standalone generated into ``simple_auth_manager_passwords.json.
generated``) and creates a backfill of the five daily periods before now (``POST /api/v2/backfills``).

Scheduling is on (asset-triggered runs need it) and DAGs are paused at creation: the periodic-tags DAG is
unpaused once its table and commits exist, so a scheduled run of the latest period may take the place of the
backfill's run of that period (the backfill skips periods that have a run); every period has one run.

Time: the DAG's timetable and the table use a fixed UTC offset chosen so that the newest of those periods
ended a moment before the backfill starts, and the table's ``tag.create-time`` puts that period's tag ~50 s
after the backfill starts. So four runs tag past periods at once (their snapshots were committed with the
library's clock set to past instants, around each period's end and creation instant), and the fifth run's
sensor defers to the triggerer, which resumes it at the creation instant; a commit made after that instant
must not be in the tag.
"""

from __future__ import annotations

import json
import threading
import time
import types

import pendulum
import pytest

from airflow_paimon.assets import paimon_table_asset
from airflow_paimon.format import Catalog
from airflow_paimon.format.periods import PeriodSpec
from tests.e2e.tables import commit_at, commit_clock, commit_now, create_table, offset_for_boundary, sleep_until

httpx = pytest.importorskip("httpx")

from tests.e2e.standalone import (  # noqa: E402
    LATE_TABLE,
    TABLE,
    Api,
    SchedulerRevival,
    Standalone,
    airflow_env,
    free_port,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

DAG_ID = "paimon_daily_tags"
DOWNSTREAM_DAG_ID = "paimon_e2e_downstream"
LATE_DAG_ID = "paimon_e2e_late_table"
EXPORT_DAG_ID = "paimon_export_changes"
EXPORT_TABLE = "demo.e2e_export"
LATE_MARGIN = 60  # seconds between the late table's creation and its tag's creation instant
STARTUP_TIMEOUT = 480  # a loaded machine (several test sessions on two cores) starts Airflow slowly
BACKFILL_TIMEOUT = 300
DEFER_MARGIN = 50  # seconds between the backfill's creation and the newest period's creation instant


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """One ``airflow standalone`` for the module's tests (starting it is most of their time); the first test
    relies on its period boundary, a moment after the start."""
    tmp_path = tmp_path_factory.mktemp("standalone")
    home = tmp_path / "airflow-home"
    home.mkdir()
    warehouse = str(tmp_path / "warehouse")
    exports = tmp_path / "exports"
    port = free_port()

    # The newest period ends shortly after Airflow should be up (it must have ended when the backfill starts).
    boundary = pendulum.now("UTC").add(seconds=20).replace(microsecond=0)
    offset = offset_for_boundary(boundary)
    env = airflow_env(home, port, warehouse, offset, PAIMON_EXPORT_TABLE=EXPORT_TABLE, PAIMON_EXPORT_PATH=str(exports))

    with Standalone(home, env) as server:
        api = Api(f"http://127.0.0.1:{port}", home)

        def healthy():
            health = api.get("/api/v2/monitor/health").json()
            parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
            return all((health.get(p) or {}).get("status") == "healthy" for p in parts)

        wait_for("Airflow to be healthy", healthy, STARTUP_TIMEOUT, server)
        wait_for("the admin password", lambda: (home / "simple_auth_manager_passwords.json.generated").exists(),
                 30, server)
        api.login()

        def dags_parsed():
            dag_ids = (DAG_ID, DOWNSTREAM_DAG_ID, LATE_DAG_ID, EXPORT_DAG_ID)
            return all(api.get(f"/api/v2/dags/{d}").status_code == 200 for d in dag_ids)

        wait_for("the DAGs", dags_parsed, 120, server)
        errors = api.get("/api/v2/importErrors").json()
        assert errors["total_entries"] == 0, errors
        scheduler = SchedulerRevival(home, env, api)
        try:
            yield types.SimpleNamespace(server=server, api=api, warehouse=warehouse, exports=exports,
                                        boundary=boundary, offset=offset, scheduler=scheduler)
        finally:
            scheduler.stop()


def create_backfill(api: Api, request: dict) -> dict:
    """On SQLite, Airflow refuses (and rolls back) a backfill while the scheduler holds the database lock (503),
    and a backfill racing the scheduler for the same runs can fail with a database error (500, rolled back too);
    asking again is what a user clicking in the UI would do. A failed attempt that did create the backfill is
    found in the DAG's backfills rather than refused as "already running" on the next one."""
    for _ in range(20):
        response = api.post("/api/v2/backfills", request)
        if response.status_code == 200:
            return response.json()
        retriable = response.status_code == 503 or (
            response.status_code == 500 and "Database error" in response.text)
        if not retriable:
            break
        existing = api.get("/api/v2/backfills", dag_id=request["dag_id"]).json()["backfills"]
        if existing:
            return existing[-1]
        time.sleep(0.5)
    raise AssertionError(f"{response.status_code}: {response.text}")


def test_backfill_through_the_rest_api_and_a_deferred_sensor(airflow):
    server, api, warehouse, boundary, offset = (airflow.server, airflow.api, airflow.warehouse, airflow.boundary,
                                                airflow.offset)
    api.unpause(DOWNSTREAM_DAG_ID)
    api.unpause(LATE_DAG_ID)

    # ---- sensors started before their table exists: one deferred to the triggerer, one poking ---------
    late_logical = pendulum.now("UTC").replace(microsecond=0)
    response = api.post(f"/api/v2/dags/{LATE_DAG_ID}/dagRuns",
                        {"logical_date": late_logical.isoformat(), "dag_run_id": "late"})
    assert response.status_code == 200, response.text
    waiting_before_table: dict[str, str] = {}

    def late_sensors_waiting():
        for task_id, waiting in (("wait_deferred", "deferred"), ("wait_poking", "running")):
            if api.task_state(LATE_DAG_ID, "late", task_id) == waiting:
                waiting_before_table[task_id] = waiting
        return len(waiting_before_table) == 2

    wait_for("the late table's sensors to wait", late_sensors_waiting, 180, server, interval=1.0,
             scheduler=airflow.scheduler)
    assert not Catalog(warehouse).table_exists(LATE_TABLE)

    # ---- the table, now that the creation instant can be put ~DEFER_MARGIN s ahead -------------------
    sleep_until(boundary.add(seconds=1))
    due = pendulum.now("UTC").add(seconds=DEFER_MARGIN).replace(microsecond=0)
    create_after = due - boundary
    seconds = int(create_after.total_seconds())
    create_time = f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    table = create_table(warehouse, TABLE, {"tag.create-time": create_time, "sink.process-time-zone": offset})
    # The late table: the period of the late run ends at its logical date; its tag is due LATE_MARGIN s from now.
    late_due = pendulum.now("UTC").add(seconds=LATE_MARGIN).replace(microsecond=0)
    late_create_after = int((late_due - late_logical).total_seconds())
    late_table = create_table(warehouse, LATE_TABLE, {
        "tag.create-time": f"{late_create_after // 3600:02d}:{late_create_after % 3600 // 60:02d}:"
                           f"{late_create_after % 60:02d}",
        "sink.process-time-zone": offset_for_boundary(late_logical)})
    late_spec = PeriodSpec.from_options(late_table.options())
    late_period = late_spec.last_period_ending_at_or_before(late_logical)
    assert late_period.end == late_logical and late_spec.creation_instant(late_period) == late_due
    spec = PeriodSpec.from_options(table.options())
    newest = spec.previous(spec.period_containing(boundary))
    assert newest.end == boundary and spec.creation_instant(newest) == due
    periods = [newest]
    for _ in range(4):
        periods.insert(0, spec.previous(periods[0]))
    p4, p3, p2, p1, p0 = periods
    ct = create_after
    ms = pendulum.duration(microseconds=1000)
    snap = {
        "a": commit_at(table, p4.start.add(hours=6), 1),
        "b": commit_at(table, p4.end, 2),  # on the boundary: still p4's tag (due later)
        "c": commit_at(table, p4.end + ct + ms, 3),  # 1 ms after p4's tag was due
        # nothing during p3
        "d": commit_at(table, p2.end + ct, 4),  # exactly when p2's tag is due
        "e": commit_at(table, p1.start.add(hours=1), 5),
        "f": commit_at(table, p1.end + ct + pendulum.duration(seconds=1), 6),
        "g": commit_at(table, p0.end.subtract(hours=1), 7),
    }
    snap["h"] = commit_now(table, 8)[0]  # real time, after p0 ended and before its tag is due
    expected = {
        spec.tag_name(p4): snap["b"],
        spec.tag_name(p3): snap["c"],
        spec.tag_name(p2): snap["d"],
        spec.tag_name(p1): snap["e"],
        spec.tag_name(p0): snap["h"],
    }

    late: dict[str, int] = {}

    def commit_after_due():
        sleep_until(due.add(seconds=1))
        late["id"], late["ms"] = commit_now(table, 9)

    writer = threading.Thread(target=commit_after_due, daemon=True)
    writer.start()

    # ---- the backfill, through the REST API (the DAG unpaused now: its table and commits are there) ----
    # The scheduler first creates the runs already due (catchup=False: the latest periods); creating the
    # backfill while it does makes the two race for the same period (SQLite: a StaleDataError).
    api.unpause(DAG_ID)

    def scheduled_runs_created():
        next_run = api.get(f"/api/v2/dags/{DAG_ID}").json().get("next_dagrun_run_after")
        return next_run is not None and pendulum.parse(next_run) > pendulum.now("UTC")

    wait_for("the scheduler to create the due runs", scheduled_runs_created, 60, server, interval=0.5)
    request = {
        "dag_id": DAG_ID,
        "from_date": p4.start.in_timezone("UTC").isoformat(),
        "to_date": p0.start.in_timezone("UTC").isoformat(),
        "max_active_runs": 5,
        "reprocess_behavior": "none",
    }
    backfill = create_backfill(api, request)
    backfill_started = pendulum.now("UTC")
    assert backfill_started < due, "Airflow was too slow to leave time for the sensor to defer"

    newest_run: dict[str, str] = {}
    seen_deferred: list[str] = []

    def runs():
        return api.get(f"/api/v2/dags/{DAG_ID}/dagRuns", limit=50).json()["dag_runs"]

    def backfill_done():
        for run in runs():
            if run["data_interval_end"] and pendulum.parse(run["data_interval_end"]) == boundary:
                newest_run["run_id"] = run["dag_run_id"]
        if "run_id" in newest_run:
            ti = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{newest_run['run_id']}/taskInstances/wait_until_due")
            if ti.status_code == 200 and ti.json()["state"] == "deferred":
                seen_deferred.append(pendulum.now("UTC").isoformat())
        state = api.get(f"/api/v2/backfills/{backfill['id']}").json()
        return state.get("completed_at") is not None

    wait_for("the backfill to complete", backfill_done, BACKFILL_TIMEOUT, server, interval=1.0,
             scheduler=airflow.scheduler)
    ends = {p.end for p in periods}

    def period_runs_done():
        done = [r for r in runs() if r["data_interval_end"] and pendulum.parse(r["data_interval_end"]) in ends]
        return len(done) == 5 and all(r["state"] in ("success", "failed") for r in done) and done

    period_runs = wait_for("a finished run of every period", period_runs_done, BACKFILL_TIMEOUT, server,
                           scheduler=airflow.scheduler)
    writer.join(timeout=30)

    assert {r["run_type"] for r in period_runs} <= {"backfill", "scheduled"}, period_runs
    assert sum(r["run_type"] == "backfill" for r in period_runs) >= 3, period_runs
    assert {r["state"] for r in period_runs} == {"success"}, [(r["dag_run_id"], r["state"]) for r in period_runs]
    for run in period_runs:
        tis = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances").json()
        states = {ti["task_id"]: ti["state"] for ti in tis["task_instances"]}
        # Backfill runs tag, and leave expiry to live runs.
        assert states == {
            "wait_until_due": "success",
            "create_tag": "success",
            "skip_expiry_in_backfills": "success",
            "expire_snapshots": "skipped" if run["run_type"] == "backfill" else "success",
        }, (run["dag_run_id"], states)

    # ---- the tags ---------------------------------------------------------------------------------
    tags = {tag.name: tag.snapshot.id for tag in table.tags.list()}
    assert tags == expected

    # ---- the deferred sensor: held by the triggerer, resumed at the creation instant ----------------
    assert seen_deferred, "the newest run's TagTimeSensor was never seen deferred"
    sensor = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{newest_run['run_id']}/taskInstances/wait_until_due").json()
    assert pendulum.parse(sensor["end_date"]) >= due
    tag_task = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{newest_run['run_id']}/taskInstances/create_tag").json()
    assert pendulum.parse(tag_task["start_date"]) >= due
    assert late and late["ms"] > due.timestamp() * 1000  # committed after the instant: not in the tag
    assert tags[spec.tag_name(p0)] != late["id"]

    # The asset events of the runs carry the tags, on the one asset of the table.
    asset = paimon_table_asset(TABLE, warehouse=warehouse)
    events = api.get("/api/v2/assets/events", limit=50).json()["asset_events"]
    assert {(e["extra"]["tag"], e["extra"]["snapshot_id"]) for e in events} == set(expected.items())
    assets = [a for a in api.get("/api/v2/assets", limit=100).json()["assets"] if a["uri"] == asset.uri]
    assert [(a["name"], a["uri"]) for a in assets] == [(asset.name, asset.uri)], assets
    assert {e["asset_id"] for e in events} == {assets[0]["id"]}

    # ---- the downstream DAG scheduled on that asset ran for the tags ---------------------------------
    def downstream_consumed():
        consumed: set[str] = set()
        downstream = api.get(f"/api/v2/dags/{DOWNSTREAM_DAG_ID}/dagRuns", limit=50).json()["dag_runs"]
        for run in downstream:
            if run["state"] != "success" or run["run_type"] != "asset_triggered":
                return None
            upstream = api.get(f"/api/v2/dags/{DOWNSTREAM_DAG_ID}/dagRuns/{run['dag_run_id']}/"
                               "upstreamAssetEvents").json()["asset_events"]
            consumed |= {e["extra"]["tag"] for e in upstream}
        return consumed == set(expected) and downstream

    downstream = wait_for("the downstream DAG to consume every tag's event", downstream_consumed, 180, server,
                          scheduler=airflow.scheduler)
    assert all(r["run_type"] == "asset_triggered" for r in downstream)

    # ---- the late table's sensors: waited for the table, then for the tag, in both modes ---------------
    def late_run_done():
        run = api.get(f"/api/v2/dags/{LATE_DAG_ID}/dagRuns/late").json()
        return run["state"] in ("success", "failed") and run

    late_run = wait_for("the late table's run", late_run_done, 300, server, scheduler=airflow.scheduler)
    assert late_run["state"] == "success", late_run
    assert waiting_before_table == {"wait_deferred": "deferred", "wait_poking": "running"}
    for task_id in ("wait_deferred", "wait_poking"):
        ti = api.get(f"/api/v2/dags/{LATE_DAG_ID}/dagRuns/late/taskInstances/{task_id}").json()
        assert ti["state"] == "success"
        assert pendulum.parse(ti["end_date"]) >= late_due, (task_id, ti["end_date"], late_due)
        assert pendulum.parse(ti["start_date"]) <= pendulum.parse(ti["end_date"])


# What the pipeline feeding demo.e2e_export does each day: upserts {id: value}, then deletes [id] (9 never exists).
# Day 0 comes before the backfill: the first backfilled day then has a previous state, and its previous period no tag.
EXPORT_DAYS = [
    ({1: "a", 2: "b", 3: "c", 4: "d"}, []),
    ({2: "b1", 5: "e"}, [1]),
    ({3: "c1", 7: "g"}, [5, 9]),
    ({6: "f", 2: "b2"}, [4, 7]),
    ({7: "g1", 6: "f1"}, [3]),
]


def changes_of(before: dict[int, str], after: dict[int, str]) -> set[tuple[int, str, str]]:
    """The plain model of a day: what its diff reports, key by key."""
    out: set[tuple[int, str, str]] = set()
    for key in before.keys() | after.keys():
        if key not in after:
            out.add((key, before[key], "delete"))
        elif key not in before:
            out.add((key, after[key], "insert"))
        elif before[key] != after[key]:
            out |= {(key, before[key], "update_preimage"), (key, after[key], "update_postimage")}
    return out


def test_change_export_backfilled_newest_first_exports_each_days_changes(airflow):
    """``paimon_export_changes`` backfilled through the REST API newest day first (``run_backwards``, one run at a
    time): each day's run tags its period and exports it before the day before is tagged, and each folder holds
    exactly that day's changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    server, api = airflow.server, airflow.api
    table = create_table(airflow.warehouse, EXPORT_TABLE, {"tag.create-time": "00:00", "sink.process-time-zone": "UTC",
                                                           "bucket": "2"})
    first = pendulum.now("UTC").start_of("day").subtract(days=len(EXPORT_DAYS) + 1)
    days = [first.add(days=i) for i in range(len(EXPORT_DAYS))]
    states = [{}]
    for day, (upserts, deletes) in zip(days, EXPORT_DAYS):
        upserted = pa.table({"id": pa.array(list(upserts), pa.int64()), "value": list(upserts.values())})
        with commit_clock(day.add(hours=12)):
            table.write(upserted)
        if deletes:
            with commit_clock(day.add(hours=13)):
                table.delete(pa.table({"id": pa.array(deletes, pa.int64())}))
        state = {k: v for k, v in {**states[-1], **upserts}.items() if k not in deletes}
        states.append(state)

    api.unpause(EXPORT_DAG_ID)

    def scheduled_runs_created():
        next_run = api.get(f"/api/v2/dags/{EXPORT_DAG_ID}").json().get("next_dagrun_run_after")
        return next_run is not None and pendulum.parse(next_run) > pendulum.now("UTC")

    wait_for("the scheduler to create the due runs", scheduled_runs_created, 60, server, interval=0.5)

    def scheduled_runs_finished():  # a backfill created while the scheduler runs the DAG races it (SQLite)
        runs = api.get(f"/api/v2/dags/{EXPORT_DAG_ID}/dagRuns", limit=50).json()["dag_runs"]
        return all(r["state"] in ("success", "failed") for r in runs)

    wait_for("the scheduled run to finish", scheduled_runs_finished, BACKFILL_TIMEOUT, server,
             scheduler=airflow.scheduler)
    backfilled = days[1:]
    request = {"dag_id": EXPORT_DAG_ID, "from_date": backfilled[0].isoformat(), "to_date": backfilled[-1].isoformat(),
               "run_backwards": True, "max_active_runs": 1, "reprocess_behavior": "none"}
    backfill = create_backfill(api, request)

    def backfill_done():
        state = api.get(f"/api/v2/backfills/{backfill['id']}").json()
        return state.get("completed_at") is not None

    wait_for("the export backfill to complete", backfill_done, BACKFILL_TIMEOUT, server, interval=1.0,
             scheduler=airflow.scheduler)
    runs = [r for r in api.get(f"/api/v2/dags/{EXPORT_DAG_ID}/dagRuns", limit=50).json()["dag_runs"]
            if r["run_type"] == "backfill"]
    assert {pendulum.parse(r["data_interval_start"]) for r in runs} == set(backfilled), runs
    assert {r["state"] for r in runs} == {"success"}, [(r["dag_run_id"], r["state"]) for r in runs]
    in_run_order = [pendulum.parse(r["data_interval_start"]) for r in sorted(runs, key=lambda r: r["start_date"])]
    assert in_run_order == backfilled[::-1]  # newest first: each day ran before the day before was tagged

    for i, day in enumerate(days[1:], start=1):
        folder = airflow.exports / EXPORT_TABLE / day.to_date_string()
        manifest = json.loads((folder / "_SUCCESS").read_text())
        got = pa.concat_tables([pq.read_table(folder / f["path"]) for f in manifest["files"]])
        exported = [(r["id"], r["value"], r["_change_type"]) for r in got.to_pylist()]
        assert len(exported) == len(set(exported)) == manifest["rows"]
        assert set(exported) == changes_of(states[i], states[i + 1]), day
    assert {t.name for t in table.tags.list()} >= {d.to_date_string() for d in backfilled}
