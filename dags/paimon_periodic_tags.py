"""Periodic tags of Paimon tables, created when they are due, then snapshot and tag expiry.

Two DAGs built the same way, one per tagging period:

* ``paimon_daily_tags``: one tag a day (``tag.create-interval = 1d``). The run of the period 2026-11-11 starts at
  2026-11-12 + the create-time, waits until the tag is due (``TagTimeSensor``: the table's own
  ``tag.create-time`` decides), creates the tag ``2026-11-11`` on the latest snapshot committed at or before that
  instant, and expires snapshots and tags by the table's retention options.
* ``paimon_two_day_tags``: ``tag.create-interval = 2d`` and ``tag.create-time = 02:30``: periods are two days
  long, aligned to 1970-01-01, each tagged by its first day (``2026-11-11`` for 2026-11-11 and 2026-11-12) on
  the latest snapshot committed at or before 2026-11-13 02:30.

Backfills (Airflow UI, ``airflow backfill create`` or ``POST /api/v2/backfills``) tag past periods exactly as
live runs would have, in any order: the sensor passes at once and the tag's snapshot depends only on the
period. Backfill runs skip the expiry: it does not depend on the period, and it must not delete snapshots that
older periods of the same backfill still have to tag.

Configuration, without any I/O at parse time (the table may not exist yet):

* ``params.table`` / ``params.paimon_conn_id`` (a run's or a backfill's conf can override them); their
  defaults come from ``PAIMON_DAILY_TAGS_TABLE`` (default ``demo.orders``), ``PAIMON_TWO_DAY_TAGS_TABLE``
  (default ``demo.orders_2d``) and ``PAIMON_CONN_ID`` (default ``paimon_default``);
* when runs start: ``PAIMON_DAILY_TAGS_CREATE_TIME`` (default ``00:00``) / ``PAIMON_DAILY_TAGS_TIMEZONE``
  (default ``UTC``), and ``PAIMON_TWO_DAY_TAGS_CREATE_TIME`` (default ``02:30``) /
  ``PAIMON_TWO_DAY_TAGS_TIMEZONE``; set them to the table's ``tag.create-time`` and ``sink.process-time-zone``.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import DAG, Param

from airflow_paimon.operators import CreateTagOperator, ExpireSnapshotsOperator
from airflow_paimon.sensors import TagTimeSensor
from airflow_paimon.timetables import TagPeriodTimetable

CONN_ID = os.environ.get("PAIMON_CONN_ID", "paimon_default")
TABLE_ARGS = {"table": "{{ params.table }}", "paimon_conn_id": "{{ params.paimon_conn_id }}"}


def _not_a_backfill(dag_run=None, **_) -> bool:
    return getattr(dag_run, "run_type", None) != "backfill"


def periodic_tags_dag(dag_id: str, env_prefix: str, interval: str, days: int, default_table: str,
                      default_create_time: str, description: str) -> DAG:
    """Wait until the period's tag is due, create it, then (live runs only) expire snapshots and tags."""
    table = os.environ.get(f"{env_prefix}_TABLE", default_table)
    create_time = os.environ.get(f"{env_prefix}_CREATE_TIME", default_create_time)
    timezone = os.environ.get(f"{env_prefix}_TIMEZONE", "UTC")
    with DAG(
        dag_id=dag_id,
        description=description,
        schedule=TagPeriodTimetable(create_time=create_time, interval=interval, timezone=timezone),
        start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        params={
            "table": Param(table, type="string", description="The Paimon table, database.table"),
            "paimon_conn_id": Param(CONN_ID, type="string", description="The Paimon connection"),
        },
        default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
        tags=["paimon", "tags"],
        doc_md=__doc__,
    ) as dag:
        wait_until_due = TagTimeSensor(task_id="wait_until_due", deferrable=True, poke_interval=60,
                                       timeout=timedelta(days=days), **TABLE_ARGS)
        # One tag at a time: a backfill otherwise runs several at once, and the first asset events of a new table
        # then race to register its asset in Airflow's database (a UNIQUE error fails all but one of them).
        create_tag = CreateTagOperator(task_id="create_tag", max_active_tis_per_dag=1, **TABLE_ARGS)
        live_runs_only = ShortCircuitOperator(task_id="skip_expiry_in_backfills", python_callable=_not_a_backfill)
        expire = ExpireSnapshotsOperator(task_id="expire_snapshots", max_active_tis_per_dag=1, **TABLE_ARGS)
        wait_until_due >> create_tag >> live_runs_only >> expire
    return dag


daily_tags = periodic_tags_dag("paimon_daily_tags", "PAIMON_DAILY_TAGS", "1d", 1, "demo.orders", "00:00",
                               "Daily Paimon tags at the table's create-time, then expiry")
two_day_tags = periodic_tags_dag("paimon_two_day_tags", "PAIMON_TWO_DAY_TAGS", "2d", 2, "demo.orders_2d", "02:30",
                                 "Paimon tags every two days at 02:30, then expiry")
