"""The example DAGs: they import cleanly without any I/O, and they tag real tables with ``dag.test()``.

Commits of past days are made with ``tests.e2e.tables.commit_at`` (the library's own commit, run with its
clock set to the chosen instant: see that module). The live test instead puts a period boundary a few seconds
from now (through the table's time zone), commits at real times around it, and lets the deferred sensor wait
for the real creation instant.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pendulum
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.periods import PeriodSpec
from airflow_paimon.hooks.paimon import PaimonHook
from tests.e2e.tables import commit_at, commit_now, connection_json, create_table, offset_for_boundary, sleep_until

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).resolve().parents[2] / "dags"


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


def load_dags():
    """Parse the repository's dags folder (as the DAG processor does), under the current environment."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    return bag


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    path = str(tmp_path / "wh")
    Catalog(path).create_database("demo")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", connection_json(path))
    return path


def dag_for_test(dag_id: str):
    """Parse the dags folder and store its DAGs in the metadata database (as the DAG processor would), so that
    ``dag.test()`` can create runs of them; returns the DAG ``dag_id``."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import sync_bag_to_db
    from airflow.utils.session import create_session

    bag = load_dags()
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags[dag_id]


def run_dag(dag, logical_date) -> tuple[str, dict[str, str]]:
    """``dag.test()`` for one logical date; returns the run's state and its task instances' states."""
    from airflow.utils.session import create_session

    dr = dag.test(logical_date=logical_date)
    with create_session() as session:
        session.add(dr)
        states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances(session=session)}
        return str(dr.state), states


def create_tag_results(dag_id: str, run_ids: list[str] | None = None) -> dict[str, dict]:
    """The XCom return values of ``create_tag`` per run of ``dag_id`` (from the metadata database)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(XComModel.run_id, XComModel.value).where(
                XComModel.dag_id == dag_id, XComModel.task_id == "create_tag", XComModel.key == "return_value"
            )
        ).all()
    out = {}
    for run_id, value in rows:
        if run_ids is None or run_id in run_ids:
            out[run_id] = XComModel.deserialize_value(type("X", (), {"value": value})())
    return out


# ---------------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------------


def test_every_dag_imports_cleanly_without_io(monkeypatch, tmp_path):
    """Every file of dags/ imports with no error, with no connection defined and no table anywhere."""
    monkeypatch.delenv("AIRFLOW_CONN_PAIMON_DEFAULT", raising=False)
    touched: list[str] = []

    def no_io(*args, **kwargs):
        touched.append("hook")
        raise AssertionError("a DAG opened a Paimon table or connection at parse time")

    monkeypatch.setattr(PaimonHook, "get_table", no_io)
    monkeypatch.setattr(PaimonHook, "get_catalog", no_io)
    monkeypatch.setattr(Catalog, "__init__", no_io)
    bag = load_dags()
    assert bag.import_errors == {}
    assert not touched
    files = {p.name for p in DAGS.glob("*.py") if not p.name.startswith("_")}
    parsed = {Path(dag.fileloc).name for dag in bag.dags.values()}
    assert files <= parsed, f"files without a DAG: {files - parsed}"
    assert {"paimon_daily_tags", "paimon_two_day_tags"} <= set(bag.dag_ids)
    tagged = bag.dags["paimon_export_tagged_changes"]
    assert [alias.name for alias in tagged.timetable.asset_condition.objects] == ["paimon_tags"]
    assert [t.task_id for t in tagged.tasks] == ["tagged_period", "export_changes"]
    for dag_id in ("paimon_daily_tags", "paimon_two_day_tags"):
        dag = bag.dags[dag_id]
        assert dag.timetable.periodic and type(dag.timetable).__name__ == "TagPeriodTimetable"
        assert [t.task_id for t in dag.tasks] == [
            "wait_until_due", "create_tag", "skip_expiry_in_backfills", "expire_snapshots"
        ]


def test_dag_schedule_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("PAIMON_DAILY_TAGS_CREATE_TIME", "01:15")
    monkeypatch.setenv("PAIMON_DAILY_TAGS_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("PAIMON_DAILY_TAGS_TABLE", "sales.orders")
    dag = load_dags().dags["paimon_daily_tags"]
    assert dag.timetable.serialize() == {"create_time": "01:15", "interval": "1d", "timezone": "Europe/Berlin"}
    assert dag.params["table"] == "sales.orders"
    two_day = load_dags().dags["paimon_two_day_tags"].timetable.serialize()
    assert two_day == {"create_time": "02:30", "interval": "2d", "timezone": "UTC"}


def test_dag_timetable_with_a_seconds_offset_survives_serialization(monkeypatch):
    """The live tests put period boundaries on whole seconds with a fixed offset such as -08:24:29; the
    scheduler and the API server see the timetable only through its serialized form."""
    from airflow.serialization.serialized_objects import DagSerialization

    monkeypatch.setenv("PAIMON_DAILY_TAGS_TIMEZONE", "-08:24:29")
    dag = load_dags().dags["paimon_daily_tags"]
    again = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    assert again.timetable.serialize()["timezone"] == "-08:24:29"
    assert again.timetable.spec.timezone.utcoffset(None) == dag.timetable.spec.timezone.utcoffset(None)


# ---------------------------------------------------------------------------------------------------------
# Runs with dag.test()
# ---------------------------------------------------------------------------------------------------------


def test_daily_dag_backfilled_in_random_order(airflow_db, warehouse, monkeypatch):
    """Past periods run in random order (as a backfill runs them) tag exactly what live runs would have."""
    monkeypatch.setenv("PAIMON_DAILY_TAGS_CREATE_TIME", "02:30")
    t = create_table(warehouse, "demo.orders", {"tag.create-time": "02:30"})
    s = {
        "a": commit_at(t, utc(2026, 11, 1, 9), 1),
        "b": commit_at(t, utc(2026, 11, 2, 0, 0, 0), 2),  # on the period boundary
        "c": commit_at(t, utc(2026, 11, 2, 2, 30, 0), 3),  # exactly when 2026-11-01's tag is due
        "d": commit_at(t, utc(2026, 11, 2, 2, 30, 0, 1000), 4),  # one millisecond later
        "e": commit_at(t, utc(2026, 11, 2, 23), 5),
        # nothing on 2026-11-03
        "f": commit_at(t, utc(2026, 11, 4, 1), 6),  # after 2026-11-03 ended, before its tag is due
        "g": commit_at(t, utc(2026, 11, 5, 3), 7),  # after 2026-11-04's tag was due
        "h": commit_at(t, utc(2026, 11, 6, 2, 29, 59, 999000), 8),
    }
    expected = {
        "2026-11-01": s["c"],
        "2026-11-02": s["e"],
        "2026-11-03": s["f"],
        "2026-11-04": s["f"],
        "2026-11-05": s["h"],
    }
    dag = dag_for_test("paimon_daily_tags")
    days = list(range(1, 6))
    random.Random(20261112).shuffle(days)
    for day in days:
        # The run of period 2026-11-DD: the timetable's run_after, its creation instant.
        logical_date = utc(2026, 11, day + 1, 2, 30)
        run_state, states = run_dag(dag, logical_date)
        assert run_state == "success", states
        assert states["create_tag"] == "success"
    tags = {tag.name: tag.snapshot.id for tag in t.tags.list()}
    assert tags == expected

    results = create_tag_results("paimon_daily_tags")
    by_tag = {r["tag"]: r for r in results.values() if r}
    for name, snapshot_id in expected.items():
        assert by_tag[name]["snapshot_id"] == snapshot_id
        assert by_tag[name]["status"] == "created"

    # Asset events carry the tag and the snapshot, on the table's asset.
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.execute(
            select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id).where(
                AssetModel.uri == f"paimon:{warehouse}/demo.orders"
            )
        ).scalars().all()
    assert {(e["tag"], e["snapshot_id"]) for e in events} == set(expected.items())

    # Running a period again changes nothing.
    run_state, states = run_dag(dag, utc(2026, 11, 3, 2, 30))
    assert run_state == "success"
    assert {tag.name: tag.snapshot.id for tag in t.tags.list()} == expected


def test_two_day_dag(airflow_db, warehouse, monkeypatch):
    monkeypatch.setenv("PAIMON_TWO_DAY_TAGS_TABLE", "demo.orders_2d")
    t = create_table(warehouse, "demo.orders_2d", {"tag.create-interval": "2d", "tag.create-time": "02:30"})
    s = {
        "a": commit_at(t, utc(2026, 11, 11, 5), 1),
        "b": commit_at(t, utc(2026, 11, 12, 23), 2),
        "c": commit_at(t, utc(2026, 11, 13, 2), 3),  # next period, but before 2026-11-11's tag is due
        "d": commit_at(t, utc(2026, 11, 13, 3), 4),
        "e": commit_at(t, utc(2026, 11, 15, 2, 31), 5),
    }
    dag = dag_for_test("paimon_two_day_tags")
    for logical_date in (utc(2026, 11, 15, 2, 30), utc(2026, 11, 13, 2, 30)):
        run_state, states = run_dag(dag, logical_date)
        assert run_state == "success", states
    assert {tag.name: tag.snapshot.id for tag in t.tags.list()} == {"2026-11-11": s["c"], "2026-11-13": s["d"]}


def test_daily_dag_live_waits_for_the_creation_instant(airflow_db, warehouse, monkeypatch):
    """Real time: the period ends ~20 s from now (time enough to parse the DAG and start the run) and its
    tag is due 5 s after that. The sensor defers (dag.test
    runs its trigger in line) until the creation instant, and the tag gets the commit made between the
    period's end and the creation instant, not the one made after it."""
    from airflow_paimon.triggers import tags as trigger_module

    boundary = pendulum.now("UTC").add(seconds=20).replace(microsecond=0)
    offset = offset_for_boundary(boundary)
    due = boundary.add(seconds=5)
    monkeypatch.setenv("PAIMON_DAILY_TAGS_CREATE_TIME", "00:00:05")
    monkeypatch.setenv("PAIMON_DAILY_TAGS_TIMEZONE", offset)
    monkeypatch.setenv("PAIMON_DAILY_TAGS_TABLE", "demo.live")
    t = create_table(warehouse, "demo.live", {"tag.create-time": "00:00:05", "sink.process-time-zone": offset})
    spec = PeriodSpec(create_time="00:00:05", timezone=offset)
    period = spec.previous(spec.period_containing(boundary))
    assert period.end == boundary and spec.creation_instant(period) == due

    commits: dict[str, tuple[int, int]] = {"before": commit_now(t, 1)}

    def writer():
        sleep_until(boundary.add(seconds=1))
        commits["between"] = commit_now(t, 2)
        sleep_until(due.add(seconds=0.5))
        commits["after"] = commit_now(t, 3)

    fired: list[pendulum.DateTime] = []
    real_run = trigger_module.TagTimeTrigger.run

    async def recording_run(self):
        async for event in real_run(self):
            fired.append(pendulum.now("UTC"))
            yield event

    monkeypatch.setattr(trigger_module.TagTimeTrigger, "run", recording_run)
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        dag = dag_for_test("paimon_daily_tags")
        run_state, states = run_dag(dag, due)
    finally:
        thread.join()
    assert run_state == "success", states
    assert len(fired) == 1 and fired[0] >= due, "the sensor did not defer until the creation instant"
    between_id, between_ms = commits["between"]
    assert boundary.timestamp() * 1000 <= between_ms < due.timestamp() * 1000
    assert commits["after"][1] > due.timestamp() * 1000
    assert t.tags.get(spec.tag_name(period)).snapshot.id == between_id


def test_tagged_changes_dag_reads_the_range_from_the_newest_tag_event(monkeypatch):
    """The DAG scheduled on tag events exports (previous_tag, tag] of the newest event; a first period (no earlier
    tag) is the empty range (tag, tag]; a run started by anything else fails with a clear message."""
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult

    monkeypatch.delenv("AIRFLOW_CONN_PAIMON_DEFAULT", raising=False)
    choose = load_dags().dags["paimon_export_tagged_changes"].get_task("tagged_period").python_callable
    asset = Asset("paimon:///wh/demo.orders")

    def event(day: int, tag: str, previous: str | None) -> AssetEventDagRunReferenceResult:
        return AssetEventDagRunReferenceResult.model_validate({
            "asset": {"name": asset.name, "uri": asset.uri, "extra": {}},
            "extra": {"table": "demo.orders", "tag": tag, "previous_tag": previous, "snapshot_id": day},
            "source_task_id": "create_tag", "source_dag_id": "d", "source_run_id": "r", "source_map_index": -1,
            "source_aliases": [{"name": "paimon_tags"}], "timestamp": pendulum.datetime(2026, 11, day, tz="UTC")})

    newest = choose(triggering_asset_events={asset: [event(12, "2026-11-11", "2026-11-10"),
                                                     event(11, "2026-11-10", None)]})
    assert newest == {"table": "demo.orders", "tag": "2026-11-11", "start": "2026-11-10"}
    assert choose(triggering_asset_events={asset: [event(11, "2026-11-10", None)]})["start"] == "2026-11-10"
    with pytest.raises(ValueError, match="not triggered by a tag's asset event"):
        choose(triggering_asset_events={})
