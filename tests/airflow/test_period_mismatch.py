"""A DAG whose timetable disagrees with its table's tag options fails at once, tagging nothing (dag.test())."""

from __future__ import annotations

import textwrap
import types

import pendulum
import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_paimon.format import Catalog
from airflow_paimon.operators.runs import plan_run
from airflow_paimon.timetables import TagPeriodTimetable
from tests.e2e.tables import commit_at, connection_json, create_table

pytestmark = pytest.mark.airflow

BERLIN = "Europe/Berlin"

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import DAG

    from airflow_paimon.operators import CreateTagOperator
    from airflow_paimon.sensors import TagTimeSensor
    from airflow_paimon.timetables import TagPeriodTimetable

    with DAG(
        "mismatched_tags",
        schedule=TagPeriodTimetable(create_time="02:30", interval="2d", timezone="Europe/Berlin"),
        start_date=pendulum.datetime(2026, 10, 1, tz="UTC"),
        catchup=False,
        default_args={"retries": 3},
    ):
        TagTimeSensor(task_id="wait_until_due", table="demo.orders")
        CreateTagOperator(task_id="create_tag", table="demo.orders")
    """
)


def test_run_period_names_both_calendars(tmp_path):
    table = create_table(str(tmp_path / "wh"), "db.t")  # daily tags at 00:00 UTC
    timetable = TagPeriodTimetable(create_time="02:30", interval="2d", timezone=BERLIN)
    start = pendulum.datetime(2026, 10, 26, tz=BERLIN)
    context = {
        "data_interval_start": start,
        "data_interval_end": start.add(days=2),
        "logical_date": start,
        "dag_run": types.SimpleNamespace(run_after=pendulum.datetime(2026, 10, 28, 2, 30, tz=BERLIN)),
        "dag": types.SimpleNamespace(timetable=timetable),
    }
    with pytest.raises(AirflowFailException) as failure:
        plan_run(table, context)
    message = str(failure.value)
    assert "[2026-10-26T00:00:00+00:00, 2026-10-28T00:00:00+00:00)" not in message  # shown in the table's zone
    assert "the data interval [2026-10-25T23:00:00+00:00, 2026-10-27T23:00:00+00:00)" in message
    assert "one tag every day (periods aligned to 1970-01-01), due at 00:00 UTC" in message
    assert "Every 2 days (aligned to 1970-01-01) at 02:30 Europe/Berlin" in message
    assert "TagPeriodTimetable(create_time='00:00', interval='1d', timezone='UTC')" in message


def test_mismatched_timetable_fails_without_retries_and_tags_nothing(airflow_db, tmp_path, monkeypatch, now):
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    warehouse = str(tmp_path / "wh")
    Catalog(warehouse).create_database("demo")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", connection_json(warehouse))
    table = create_table(warehouse, "demo.orders")  # daily tags at 00:00 UTC
    for i, day in enumerate((25, 26, 27, 28), start=1):
        commit_at(table, pendulum.datetime(2026, 10, day, 12, tz="UTC"), i)

    dag_file = airflow_db / "dags" / "mismatched_tags.py"
    dag_file.write_text(DAG_FILE)
    try:
        bag = DagBag(dag_folder=str(dag_file))
    finally:
        dag_file.unlink()
    assert bag.import_errors == {}
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)
    dag = bag.dags["mismatched_tags"]

    # The run of the Berlin period [10-26, 10-28), due 10-28 02:30 Berlin; the table's periods are UTC days.
    dr = dag.test(logical_date=pendulum.datetime(2026, 10, 28, 2, 30, tz=BERLIN))
    with create_session() as session:
        run = session.merge(dr)
        tis = {ti.task_id: ti for ti in run.get_task_instances(session=session)}
        assert str(run.state) == "failed"
        assert run.data_interval_start == pendulum.datetime(2026, 10, 26, tz=BERLIN)
        # Failed at once although the tasks have retries: retrying cannot make the calendars agree.
        for task_id in ("wait_until_due", "create_tag"):
            assert (str(tis[task_id].state), tis[task_id].try_number) == ("failed", 1), task_id
    assert table.tags.names() == []
