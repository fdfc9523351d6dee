"""Merge each day's incremental files into a historical Paimon table, tag the day, compact weekly, expire.

Every day (a cron data-interval timetable: the run of day D covers [D, D+1) and starts after D ends; every
template uses the data interval, ``{{ data_interval_start | ds }}``, so manual runs and backfills address the same
day as scheduled ones):

1. ``check_day``: skip the day's merge and tag when the tag ``D`` already exists (the day is done), unless the
   run's ``params.reapply`` asks to merge again;
2. ``merge_increment`` (:class:`~airflow_paimon.operators.merge.MergeIncrementalOperator`, in the worker when it
   fits its memory budget, else on Spark): MERGE the
   files of ``{params.incoming}/D/`` into the table: rows with ``op = 'D'`` delete, the others upsert. Only the
   increment is read and written (new level-0 files; merge-on-read does the rest). Exactly once: a retry, or a
   re-run of the same day, finds the day's commit and commits nothing; a run with ``params.reapply`` merges the
   day's files again as they are then (every such run does). A day whose folder holds no data file merges
   nothing (``no_changes``);
3. ``tag_day``: tag ``D`` on the merge's snapshot, so the tag holds the table as of the end of day D's merge
   (for a day without changes, the table as it stood);
4. on Sundays, ``compact`` (full compaction: in the worker when it fits its memory budget, on Spark otherwise)
   and ``remove_orphan_files`` (files older than 3 days that nothing references, e.g. left by killed jobs);
5. ``expire_snapshots`` by the table's retention options (tags keep what they need).

Backfill-safe: the merge of day D is identified by (dag, task, D), the tag of day D names its snapshot, and a
done day is skipped. The table should use ``sequence.field`` (e.g. ``updated_at``): then a day merged out of
order (a backfill after later days) cannot overwrite newer values with older ones.

Configuration (no I/O at parse time): ``params.table``, ``params.incoming``, ``params.paimon_conn_id`` (run
conf can override them), defaults from ``PAIMON_MERGE_TABLE`` (``demo.orders_history``), ``PAIMON_MERGE_INCOMING``
(``/data/incoming/orders``) and ``PAIMON_CONN_ID`` (``paimon_default``); the Spark connection from
``PAIMON_SPARK_CONN_ID`` (``spark_default``; when it does not exist, Spark runs ``local[*]`` in the worker) and
``spark.sql.shuffle.partitions`` from ``PAIMON_MERGE_SHUFFLE_PARTITIONS`` (64).
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_paimon.merge import matched_delete, matched_update, not_matched_insert
from airflow_paimon.operators.expire import ExpireSnapshotsOperator
from airflow_paimon.operators.maintenance import CompactOperator, RemoveOrphanFilesOperator
from airflow_paimon.operators.merge import MergeIncrementalOperator
from airflow_paimon.operators.tags import CreateTagOperator

TABLE = os.environ.get("PAIMON_MERGE_TABLE", "demo.orders_history")
INCOMING = os.environ.get("PAIMON_MERGE_INCOMING", "/data/incoming/orders")
CONN_ID = os.environ.get("PAIMON_CONN_ID", "paimon_default")
SPARK_CONN_ID = os.environ.get("PAIMON_SPARK_CONN_ID", "spark_default")
SPARK_CONF = {"spark.sql.shuffle.partitions": os.environ.get("PAIMON_MERGE_SHUFFLE_PARTITIONS", "64")}

TABLE_ARGS = {"paimon_conn_id": "{{ params.paimon_conn_id }}"}
SPARK_ARGS = {"conn_id": SPARK_CONN_ID, "conf": SPARK_CONF}
DAY = "{{ data_interval_start | ds }}"


def _day_not_done(params=None, data_interval_start=None, **_) -> bool:
    """False (skip the merge and the tag) when the day's tag exists and no re-merge is asked for."""
    from airflow_paimon.hooks.paimon import PaimonHook

    if str(params.get("reapply", False)).lower() in ("true", "1"):
        return True
    table = PaimonHook(paimon_conn_id=params["paimon_conn_id"]).get_table(params["table"])
    return not table.tags.exists(data_interval_start.strftime("%Y-%m-%d"))


def _on_sunday(data_interval_start=None, **_) -> bool:
    return data_interval_start is not None and data_interval_start.weekday() == 6


with DAG(
    dag_id="paimon_merge_incremental",
    description="Daily MERGE of incremental files into a historical Paimon table, daily tag, weekly compaction",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "table": Param(TABLE, type="string", description="The historical Paimon table, database.table"),
        "incoming": Param(INCOMING, type="string", description="Folder with one sub-folder of files per day"),
        "paimon_conn_id": Param(CONN_ID, type="string", description="The Paimon connection"),
        "reapply": Param(False, type="boolean", description="Merge the day again even if it is done"),
    },
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["paimon", "merge"],
    doc_md=__doc__,
) as dag:
    check_day = ShortCircuitOperator(task_id="check_day", python_callable=_day_not_done)
    merge = MergeIncrementalOperator(
        task_id="merge_increment",
        table="{{ params.table }}",
        source="{{ params.incoming }}/" + DAY,
        source_format="parquet",
        clauses=[
            matched_delete(condition="s.op = 'D'"),
            matched_update(set="*"),
            not_matched_insert(values="*", condition="s.op <> 'D'"),
        ],
        reapply="{{ params.reapply }}",
        **TABLE_ARGS,
        **SPARK_ARGS,
    )
    tag = CreateTagOperator(
        task_id="tag_day",
        table="{{ params.table }}",
        tag_name=DAY,
        snapshot_id="{{ ti.xcom_pull(task_ids='merge_increment')['snapshot_id'] }}",
        if_exists="replace",
        **TABLE_ARGS,
    )
    weekly = ShortCircuitOperator(task_id="on_sunday", python_callable=_on_sunday, trigger_rule="none_failed",
                                  ignore_downstream_trigger_rules=False)
    compact = CompactOperator(task_id="compact", table="{{ params.table }}", **TABLE_ARGS, **SPARK_ARGS)
    orphans = RemoveOrphanFilesOperator(task_id="remove_orphan_files", table="{{ params.table }}",
                                        older_than="3 d", **TABLE_ARGS, **SPARK_ARGS)
    expire = ExpireSnapshotsOperator(task_id="expire_snapshots", table="{{ params.table }}",
                                     trigger_rule="none_failed", max_active_tis_per_dag=1, **TABLE_ARGS)

    check_day >> merge >> tag >> weekly >> compact >> orphans >> expire
