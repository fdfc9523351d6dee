"""The example DAG ``paimon_rollback`` under real Airflow (``dag.test()`` on SQLite): a run's conf names the
target explicitly; a date-named tag that is gone fails the run instead of rolling back to that date, and a time
whose snapshot expired fails instead of rolling back further than asked."""

from __future__ import annotations

import pendulum
import pytest

from airflow_paimon.format import Catalog
from tests.airflow.test_dags import dag_for_test
from tests.e2e.tables import commit_at, connection_json, create_table

pytestmark = pytest.mark.airflow


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


@pytest.fixture
def table(tmp_path, monkeypatch):
    """demo.orders with snapshots 1..6 committed daily from 2026-10-20 (snapshot n holds keys 1..n)."""
    path = str(tmp_path / "wh")
    Catalog(path).create_database("demo")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", connection_json(path))
    t = create_table(path, "demo.orders")
    for n in range(1, 7):
        commit_at(t, utc(2026, 10, 19 + n, 12), n)
    return t


def run_rollback(conf: dict) -> tuple[str, str]:
    """One ``dag.test()`` run with this conf: (run state, the rollback task's state)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    dag = dag_for_test("paimon_rollback")
    dr = dag.test(run_conf=conf)
    with create_session() as session:
        state = session.scalar(select(TaskInstance.state).where(TaskInstance.dag_id == dr.dag_id,
                                                                 TaskInstance.run_id == dr.run_id))
    return str(dr.state), str(state)


def test_rollback_dag_to_a_tag_then_the_gone_tag_is_an_error_not_a_date(airflow_db, table):
    table.tags.create("2026-10-25", snapshot_id=6)
    table.tags.create("2026-10-23", snapshot_id=4)
    assert run_rollback({"table": "demo.orders", "tag": "2026-10-23", "dry_run": True}) == ("success", "success")
    assert table.latest_snapshot().id == 6
    assert run_rollback({"table": "demo.orders", "tag": "2026-10-23"}) == ("success", "success")
    assert table.snapshot_manager.ids() == [1, 2, 3, 4]
    assert not table.tags.exists("2026-10-25")
    # "2026-10-25" is gone with the rollback: as a date it would name snapshot 4 or earlier; as a tag it fails
    assert run_rollback({"table": "demo.orders", "tag": "2026-10-25"}) == ("failed", "failed")
    assert table.snapshot_manager.ids() == [1, 2, 3, 4]


def test_rollback_dag_refuses_a_time_whose_snapshot_expired(airflow_db, table):
    table.tags.create("two", snapshot_id=2)
    table.maintenance.expire_snapshots(retain_min=2, older_than="2100-01-01", max_deletes=100)
    assert table.snapshot_manager.ids() == [5, 6]
    assert run_rollback({"table": "demo.orders", "time": "2026-10-23 13:00:00+00:00"}) == ("failed", "failed")
    assert table.snapshot_manager.ids() == [5, 6] and table.tags.exists("two")
    assert run_rollback({"table": "demo.orders", "time": "2026-10-24 13:00:00+00:00"}) == ("success", "success")
    assert table.snapshot_manager.ids() == [5]
    assert run_rollback({"table": "demo.orders", "snapshot": 2}) == ("success", "success")
    assert table.snapshot_manager.ids() == [2]
