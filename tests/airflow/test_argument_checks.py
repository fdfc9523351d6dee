"""Literal argument mistakes fail when the DAG is defined (an import error in Airflow's DAG processor, naming the
argument); templated ones fail the task once rendered, before anything is changed."""

from __future__ import annotations

import datetime as dt
import textwrap

import pendulum
import pytest

from airflow_paimon.merge import matched_delete, matched_update, not_matched_insert
from airflow_paimon.operators import (
    CreateTagOperator,
    DeleteTagOperator,
    ExpireSnapshotsOperator,
    MergeIncrementalOperator,
    RemoveOrphanFilesOperator,
)
from airflow_paimon.operators.maintenance import CompactOperator
from airflow_paimon.sensors import TagSensor, TagTimeSensor
from airflow_paimon.timetables import TagPeriodTimetable
from tests.e2e.tables import commit_at, create_table

pytestmark = pytest.mark.airflow

UPSERT_INSERT = not_matched_insert(values={"id": "s.id", "value": "s.value"})

MISTAKES = {
    "change feed without a range": (MergeIncrementalOperator, {"table": "db.t", "source": {"change_feed": "db.s"}},
                                    r"source: a change feed needs exactly one of period=True, start .* got none"),
    "change feed with two ranges": (
        MergeIncrementalOperator, {"table": "db.t", "source": {"change_feed": "db.s", "period": True,
                                                               "consumer_id": "c"}},
        r"got \['period', 'consumer_id'\]"),
    "change feed consumer id": (MergeIncrementalOperator,
                                {"table": "db.t", "source": {"change_feed": "db.s", "consumer_id": "a/b"}},
                                r"source.consumer_id: consumer id 'a/b' is not allowed"),
    "change feed key": (MergeIncrementalOperator,
                        {"table": "db.t", "source": {"change_feed": "db.s", "start": 1, "until": 2}},
                        r"source: unknown change-feed key\(s\) \['until'\]"),
    "source_format": (MergeIncrementalOperator, {"table": "db.t", "source": "/in", "source_format": "parket"},
                      r"source_format: 'parket' is not one of .*did you mean 'parquet'"),
    "time_retained": (CreateTagOperator, {"table": "db.t", "time_retained": "7 dayz"},
                      r"time_retained: expected a duration such as '7d'"),
    "retain_min negative": (ExpireSnapshotsOperator, {"table": "db.t", "retain_min": -5},
                            r"retain_min: must be at least 1, got -5"),
    "retain_min above retain_max": (ExpireSnapshotsOperator, {"table": "db.t", "retain_min": 10, "retain_max": 2},
                                    r"retain_min and retain_max: retain_min=10 is above retain_max=2"),
    "older_than": (ExpireSnapshotsOperator, {"table": "db.t", "older_than": "7 dayz"},
                   r"older_than: expected a duration such as '7d'"),
    "max_deletes": (ExpireSnapshotsOperator, {"table": "db.t", "max_deletes": "lots"},
                    r"max_deletes: expected a whole number"),
    "table without database": (CreateTagOperator, {"table": "orders"},
                               r"table: 'orders' names no database: write it as 'database.table'"),
    "Spark operator table without database": (CompactOperator, {"table": "orders"},
                                              r"table: 'orders' names no database"),
    "numeric tag name": (CreateTagOperator, {"table": "db.t", "tag_name": "123"},
                         r"tag_name: '123' is purely numeric"),
    "tag name with a path": (DeleteTagOperator, {"table": "db.t", "tag_name": "../x"},
                             r"tag_name: .*must not contain '/'"),
    "snapshot_id and as_of": (CreateTagOperator, {"table": "db.t", "snapshot_id": 3, "as_of": "2026-11-11"},
                              r"snapshot_id and as_of: give one of them"),
    "as_of": (CreateTagOperator, {"table": "db.t", "as_of": "yesterday"},
              r"as_of: 'yesterday' is not a point in time; expected ISO 8601"),
    "if_exists": (CreateTagOperator, {"table": "db.t", "if_exists": "overwrite"}, r"if_exists: 'overwrite'"),
    "if_exists case": (CreateTagOperator, {"table": "db.t", "if_exists": "Replace"},
                       r"if_exists: 'Replace' is not one of .*did you mean 'replace'"),
    "condition syntax": (MergeIncrementalOperator,
                         {"table": "db.t", "source": "/in", "clauses": [matched_delete(condition="s.op = "),
                                                                         matched_update()]},
                         r"clauses\[0\] \(WHEN MATCHED AND s.op =  THEN DELETE\) condition: 's.op = ' is not valid "
                         r"Spark SQL"),
    "assignment syntax": (MergeIncrementalOperator,
                          {"table": "db.t", "source": "/in",
                           "clauses": [matched_update(set={"value": "upper(s.value"})]},
                          r"clauses\[0\] .* value: 'upper\(s.value' is not valid Spark SQL"),
    "on column the insert does not set": (
        MergeIncrementalOperator,
        {"table": "db.t", "source": "/in", "on": "idd", "clauses": [matched_update(), UPSERT_INSERT]},
        r"clauses: clauses\[1\] .* sets no value for the on column\(s\) \['idd'\]"),
    "on column twice": (MergeIncrementalOperator, {"table": "db.t", "source": "/in", "on": "id, ID"},
                        r"on: 'ID' is given twice"),
    "on not a column name": (MergeIncrementalOperator, {"table": "db.t", "source": "/in", "on": "id;drop"},
                             r"on: 'id;drop' .* is not a column name"),
    "unconditional update first": (
        MergeIncrementalOperator,
        {"table": "db.t", "source": "/in",
         "clauses": [matched_update(), matched_update(set="*", condition="s.ts > t.ts")]},
        r"clauses: clause #2 .* can never apply: clause #1 .* has no condition"),
    "clauses as bad JSON": (MergeIncrementalOperator, {"table": "db.t", "source": "/in", "clauses": "[{"},
                            r"clauses: clauses is not valid JSON"),
    "reapply": (MergeIncrementalOperator, {"table": "db.t", "source": "/in", "reapply": "maybe"},
                r"reapply: expected True or False"),
    "driver_bytes": (MergeIncrementalOperator, {"table": "db.t", "source": "/in", "driver_bytes": -1},
                     r"driver_bytes: must be at least 0"),
    "orphan older_than under an hour": (RemoveOrphanFilesOperator, {"table": "db.t", "older_than": "30 min"},
                                        r"older_than: '30 min' would delete files younger than one hour.*"
                                        r"allow_recent=True"),
    "orphan older_than typo": (RemoveOrphanFilesOperator, {"table": "db.t", "older_than": "3 dayz"},
                               r"older_than: expected a duration"),
    "orphan dry_run string": (RemoveOrphanFilesOperator, {"table": "db.t", "dry_run": "false"},
                              r"dry_run: expected True or False, not the string 'false'"),
    "compact partitions": (CompactOperator, {"table": "db.t", "partitions": ["day=1"]},
                           r"partitions: expected a list of"),
    "wait_for_data string": (TagTimeSensor, {"table": "db.t", "wait_for_data": "false"},
                             r"wait_for_data: expected True or False, not the string 'false'"),
    "deferrable string": (TagSensor, {"table": "db.t", "tag_name": "x", "deferrable": "yes"},
                          r"deferrable: expected True or False, not the string 'yes'"),
    "sensor table": (TagTimeSensor, {"table": "t"}, r"table: 't' names no database"),
    "expire_tags": (CreateTagOperator, {"table": "db.t", "expire_tags": "no"}, r"expire_tags: expected True or False"),
}


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_literal_mistakes_fail_when_the_dag_is_defined(case):
    from airflow.sdk import DAG

    operator, kwargs, message = MISTAKES[case]
    with DAG(f"checks_{abs(hash(case))}", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        with pytest.raises(ValueError, match=message) as raised:
            operator(task_id="task", **kwargs)
    assert f"{operator.__name__}(task_id='task')" in str(raised.value)


def test_legacy_time_zone_names_are_refused_with_the_canonical_one():
    with pytest.raises(ValueError, match=r"timezone: 'US/Pacific' is a legacy .*'America/Los_Angeles'"):
        TagPeriodTimetable(timezone="US/Pacific")
    with pytest.raises(ValueError, match=r"timezone: 'Japan' .*'Asia/Tokyo'"):
        TagPeriodTimetable(timezone="Japan")
    for good in ("America/Los_Angeles", "UTC", "+08:00", "Etc/GMT-3", "GMT+2"):
        TagPeriodTimetable(timezone=good)


def test_what_is_right_or_templated_passes_parsing():
    from airflow.sdk import DAG

    with DAG("checks_ok", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        CreateTagOperator(task_id="a", table="db.t", tag_name="2026-11-11", time_retained="7d", if_exists="replace")
        CreateTagOperator(task_id="b", table="{{ params.table }}", tag_name="{{ ds }}",
                          time_retained="{{ params.keep }}", snapshot_id="{{ ti.xcom_pull('m') }}")
        CreateTagOperator(task_id="c", table="db.t", time_retained=dt.timedelta(days=3), snapshot_id=4)
        ExpireSnapshotsOperator(task_id="d", table="db.t", retain_min=2, retain_max=2, older_than="2026-11-01")
        ExpireSnapshotsOperator(task_id="e", table="db.t", retain_min="{{ params.n }}", older_than="3 d")
        MergeIncrementalOperator(
            task_id="f", table="db.t", source="/in/{{ ds }}", source_format="CSV", on=["id"], reapply="{{ params.r }}",
            clauses=[matched_delete(condition="s.op = 'D' AND s.ts > t.ts"), matched_update(set="*"),
                     not_matched_insert(values={"id": "s.id", "value": "coalesce(s.value, '')"})],
        )
        MergeIncrementalOperator(task_id="g", table="db.t", source="/in", clauses="{{ params.clauses }}")
        RemoveOrphanFilesOperator(task_id="h", table="db.t", older_than="30 min", allow_recent=True)
        RemoveOrphanFilesOperator(task_id="i", table="db.t", older_than=dt.timedelta(hours=2))
        TagTimeSensor(task_id="j", table="db.t", wait_for_data=True, deferrable=False)
        TagSensor(task_id="k", table="db.t", tag_name="{{ ds }}")


def parse_folder(folder):
    """Parse a DAG folder as the DAG processor does, and store its DAGs as it would (for ``dag.test()``)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    bag = DagBag(dag_folder=str(folder))
    if bag.dags:
        with create_session() as session:
            DagBundlesManager().sync_bundles_to_db(session=session)
        sync_bag_to_db(bag, "dags-folder", None)
    return bag


def test_the_dag_processor_reports_the_argument(tmp_path):
    """What a DAG author sees: an import error of the DAG file that names the task and the argument."""
    (tmp_path / "broken_dag.py").write_text(textwrap.dedent("""
        import pendulum
        from airflow.sdk import DAG
        from airflow_paimon.operators import CreateTagOperator

        with DAG("broken", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
            CreateTagOperator(task_id="tag", table="sales.orders", time_retained="7 dayz")
    """))
    bag = parse_folder(tmp_path)
    assert bag.dags == {}
    [error] = bag.import_errors.values()
    assert "CreateTagOperator(task_id='tag'): time_retained: expected a duration such as '7d'" in error


# ---------------------------------------------------------------------------------------------------------
# Templated values, once rendered (dag.test(): Airflow renders, then the operator checks, then executes)
# ---------------------------------------------------------------------------------------------------------


def run_dag(dag, day: int, **conf):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    run = dag.test(logical_date=pendulum.datetime(2026, 11, day, tz="UTC"), run_conf=conf or None)
    state, run_id = str(run.state), run.run_id
    with create_session() as session:
        tis = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag.dag_id,
                                                         TaskInstance.run_id == run_id)).all()
        states = {ti.task_id: str(ti.state) for ti in tis}
    return state, states


def test_templated_values_are_checked_once_rendered(airflow_db, warehouse, tmp_path):
    table = create_table(warehouse, "db.orders", {"tag.create-time": "02:30"})
    commit_at(table, pendulum.datetime(2026, 11, 11, 10, tz="UTC"), 1)
    (tmp_path / "rendered_checks.py").write_text(textwrap.dedent("""
        import pendulum
        from airflow.sdk import DAG, Param
        from airflow_paimon.operators import CreateTagOperator, ExpireSnapshotsOperator

        with DAG("rendered_checks", schedule=None, start_date=pendulum.datetime(2026, 1, 1),
                 params={"keep": Param("7d", type="string"), "n": Param("1", type="string")}):
            CreateTagOperator(task_id="tag", table="db.orders", tag_name="kept", time_retained="{{ params.keep }}",
                              expire_tags=False)
            ExpireSnapshotsOperator(task_id="expire", table="db.orders", retain_min="{{ params.n }}", dry_run=True,
                                    expire_tags=False)
    """))
    dag = parse_folder(tmp_path).dags["rendered_checks"]

    state, states = run_dag(dag, 12, keep="7 dayz", n="-5")
    assert state == "failed"
    assert states == {"tag": "failed", "expire": "failed"}
    assert table.tags.names() == []  # nothing changed

    state, states = run_dag(dag, 13, keep="7d", n="1")
    assert state == "success", states
    assert table.tags.get("kept").time_retained == dt.timedelta(days=7)
