"""ChangesSensor and ChangesTrigger: which snapshots count as changes, the sensor under ``dag.test()`` in both
modes (the deferred one resumed by its trigger once a commit lands), and its argument checks at parse time."""

from __future__ import annotations

import asyncio
import textwrap
import threading

import pyarrow as pa
import pytest

from airflow_paimon.arguments import ArgumentError
from airflow_paimon.sensors import ChangesSensor
from airflow_paimon.triggers import ChangesTrigger
from airflow_paimon.triggers.changes import changed_snapshots
from tests.airflow.test_export_changes import run
from tests.airflow.test_sensors_triggers import round_trip
from tests.e2e.tables import create_table, rows

pytestmark = pytest.mark.airflow

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import DAG

    from airflow_paimon.sensors import ChangesSensor

    def sensor_dag(dag_id, **kwargs):
        with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
            ChangesSensor(task_id="wait", table="demo.orders", poke_interval=0.2, timeout=120, **kwargs)
        return dag

    after_tag = sensor_dag("changes_after_tag", after_tag="{{ dag_run.conf['tag'] }}")
    after_consumer = sensor_dag("changes_after_consumer", consumer_id="billing", deferrable=True)
    """
)


@pytest.fixture
def table(warehouse):
    t = create_table(warehouse, "demo.orders", {"bucket": "1"})
    t.write(rows(1, 2))
    t.create_tag("first")
    return t


@pytest.fixture
def sensor_dags(airflow_db, tmp_path):
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "sensor_dags.py").write_text(DAG_FILE)
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags


def test_compactions_without_changelog_are_no_changes(table):
    table.write(rows(3))                                   # 2: APPEND
    table.maintenance.compact()                            # 3: COMPACT, no changelog
    table.delete(pa.table({"id": pa.array([1], pa.int64())}))  # 4: APPEND
    kinds = {s.id: s.commit_kind for s in table.snapshot_manager.snapshots()}
    assert kinds[3] == "COMPACT"
    assert [c["snapshot_id"] for c in changed_snapshots(table, 1)] == [2, 4]
    assert changed_snapshots(table, 2)[0]["snapshot_id"] == 4
    assert changed_snapshots(table, 4) == []


def test_lookup_compaction_carries_changes(warehouse):
    t = create_table(warehouse, "demo.looked", {"bucket": "1", "changelog-producer": "lookup"})
    t.write(rows(1))
    compacts = [c["snapshot_id"] for c in changed_snapshots(t, 0) if c["commit_kind"] == "COMPACT"]
    assert compacts, "a lookup write's changelog comes in a COMPACT snapshot, which counts as changes"
    assert all(t.snapshot_manager.snapshot(i).changelog_record_count for i in compacts)


def test_sensor_passes_after_a_tag_with_later_changes(table, sensor_dags):
    dag = sensor_dags["changes_after_tag"]
    table.write(rows(3))
    state, result = run(dag, {"tag": "first"})
    assert state == "success"
    assert result["start_snapshot"] == 1 and result["end_snapshot"] == 2 and result["snapshots"] == [2]
    assert result["table"] == "demo.orders"


def test_sensor_fails_at_once_for_an_unknown_tag(table, sensor_dags):
    state, result = run(sensor_dags["changes_after_tag"], {"tag": "missing"})
    assert state == "failed" and result is None


def test_deferred_sensor_resumes_when_a_commit_lands(table, sensor_dags):
    """The consumer has read everything: the sensor defers; once it has, another thread commits, and the trigger
    (run in line by dag.test) resumes the task with exactly that snapshot."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    table.consumers.create("billing", 2)
    committed: list[int] = []
    done = threading.Event()

    def commit_once_deferred() -> None:
        while not done.is_set():
            with create_session() as session:
                deferred = session.scalars(select(TaskInstance.next_method).where(
                    TaskInstance.dag_id == "changes_after_consumer", TaskInstance.task_id == "wait")).all()
            if "execute_complete" in deferred:
                snapshot = table.write(rows(9))
                assert snapshot is not None
                committed.append(snapshot.id)
                return
            done.wait(0.05)

    worker = threading.Thread(target=commit_once_deferred)
    worker.start()
    try:
        state, result = run(sensor_dags["changes_after_consumer"], {})
    finally:
        done.set()
        worker.join()
    assert state == "success"
    assert committed == [2]
    assert result["start_snapshot"] == 1 and result["snapshots"] == [2]
    assert table.consumers.get("billing") == 2  # the sensor never moves the consumer


def test_trigger_round_trips_and_reports_the_range(table):
    table.write(rows(3))
    table.write(rows(4))
    trigger = round_trip(ChangesTrigger(paimon_conn_id="paimon_default", table="demo.orders", after_snapshot=1,
                                        poll_interval=0.1))

    async def first():
        return await asyncio.wait_for(trigger.run().__anext__(), 10)

    event = asyncio.run(first())
    assert event.payload == {"status": "success", "table": "demo.orders", "start_snapshot": 1, "end_snapshot": 3,
                             "snapshots": [2, 3], "commit_kinds": ["APPEND", "APPEND"],
                             "end_commit_time": table.snapshot_manager.snapshot(3).time_millis}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give exactly one position"),
        ({"consumer_id": "a", "after_tag": "first"}, "got consumer_id and after_tag"),
        ({"consumer_id": "a/b"}, "consumer_id"),
        ({"after_tag": "123"}, "after_tag"),
        ({"after_snapshot": -1}, "after_snapshot"),
        ({"after_snapshot": 1, "deferrable": "yes"}, "deferrable"),
    ],
)
def test_bad_arguments_fail_when_the_dag_is_parsed(kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        ChangesSensor(task_id="wait", table="demo.orders", **kwargs)


def test_trigger_refuses_a_bad_position():
    with pytest.raises(ValueError, match="after_snapshot"):
        ChangesTrigger(paimon_conn_id="paimon_default", table="demo.orders", after_snapshot=-3)
