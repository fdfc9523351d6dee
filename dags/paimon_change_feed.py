"""Propagate a Paimon table's daily changes: into a ``changelog-producer = lookup`` table, on into a replica through a
consumer, and out as one Parquet folder of changes per day.

Every day D (the run's data interval is [D, D+1); templates use it, so backfills address the same day):

1. ``merge_day`` (:class:`~airflow_paimon.operators.merge.MergeIncrementalOperator`): MERGE the source table's
   change feed of the day -- from its periodic tag before D to its tag D, Paimon's ``incremental-to-auto-tag`` --
   into the changelog table: deleted keys are deleted, the rest upserted, the last change of a key winning. The
   table's ``lookup`` producer writes the exact changelog of that MERGE (+I, -U/+U, -D). The source's tag D must
   exist (its own pipeline tags it, e.g. ``paimon_merge_incremental``); with no earlier periodic tag the day merges
   nothing, as Paimon's answer is empty.
2. ``tag_day``: tag D on the changelog table, on the merge's snapshot.
3. ``export_changes`` (:class:`~airflow_paimon.operators.changes.ExportChangesOperator`): the changelog table's
   changes from its tag before D to tag D, read from its changelog files, to ``<PAIMON_CHANGE_FEED_EXPORT_PATH>/
   <table>/<D>/`` (complete when ``_SUCCESS`` exists). The first day of a new table exports nothing (no earlier
   tag).
4. ``propagate``: MERGE the changelog table's change feed into the replica through the consumer ``replica``: from
   the consumer's position to the latest snapshot; the consumer advances only after the replica's commit landed,
   and a retry after any failure applies that range exactly once (the commit identifier is derived from it).

The changelog table, the replica and the consumer are created once, before the first run::

    cdc = catalog.create_table("demo.orders_cdc", schema, primary_keys=["id"],
                               options={"bucket": "4", "changelog-producer": "lookup"})
    catalog.create_table("demo.orders_replica", schema, primary_keys=["id"], options={"bucket": "4"})
    cdc.consumers.create("replica")

Configuration (no I/O at parse time): ``PAIMON_CHANGE_FEED_SOURCE`` (``demo.orders``), ``PAIMON_CHANGE_FEED_TABLE``
(``demo.orders_cdc``), ``PAIMON_CHANGE_FEED_REPLICA`` (``demo.orders_replica``), ``PAIMON_CHANGE_FEED_EXPORT_PATH``
(``/tmp/paimon-exports``), ``PAIMON_CONN_ID`` and ``PAIMON_SPARK_CONN_ID`` (``spark_default``; without that
connection Spark runs ``local[*]`` in the worker).
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_paimon.operators.changes import ExportChangesOperator
from airflow_paimon.operators.merge import MergeIncrementalOperator
from airflow_paimon.operators.tags import CreateTagOperator

SOURCE = os.environ.get("PAIMON_CHANGE_FEED_SOURCE", "demo.orders")
TABLE = os.environ.get("PAIMON_CHANGE_FEED_TABLE", "demo.orders_cdc")
REPLICA = os.environ.get("PAIMON_CHANGE_FEED_REPLICA", "demo.orders_replica")
EXPORT_PATH = os.environ.get("PAIMON_CHANGE_FEED_EXPORT_PATH", "/tmp/paimon-exports")
CONN_ID = os.environ.get("PAIMON_CONN_ID", "paimon_default")
SPARK_ARGS = {"conn_id": os.environ.get("PAIMON_SPARK_CONN_ID", "spark_default"),
              "conf": {"spark.sql.shuffle.partitions": "4"}}
DAY = "{{ data_interval_start | ds }}"

with DAG(
    dag_id="paimon_change_feed",
    description="A table's daily changes merged into a lookup-changelog table, propagated to a replica through a "
                "consumer, and exported per day",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,   # the days' merges go in order: a day's changes build on the day before
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["paimon", "changes", "merge"],
    doc_md=__doc__,
) as dag:
    merge_day = MergeIncrementalOperator(
        task_id="merge_day",
        table=TABLE,
        source={"change_feed": SOURCE, "period": True},
        paimon_conn_id=CONN_ID,
        **SPARK_ARGS,
    )
    tag_day = CreateTagOperator(
        task_id="tag_day",
        table=TABLE,
        tag_name=DAY,
        snapshot_id="{{ ti.xcom_pull(task_ids='merge_day')['snapshot_id'] }}",
        if_exists="replace",
        paimon_conn_id=CONN_ID,
    )
    export = ExportChangesOperator(
        task_id="export_changes",
        table=TABLE,
        period=True,
        mode="changelog",
        path=f"{EXPORT_PATH}/{TABLE}/{DAY}",
        paimon_conn_id=CONN_ID,
    )
    propagate = MergeIncrementalOperator(
        task_id="propagate",
        table=REPLICA,
        source={"change_feed": TABLE, "consumer_id": "replica"},
        paimon_conn_id=CONN_ID,
        **SPARK_ARGS,
    )
    merge_day >> tag_day >> [export, propagate]
