"""Tags of a Paimon table every two days, due at 02:30 after each period, then expiry.

The table has ``tag.create-interval = 2d`` and ``tag.create-time = 02:30``: periods are two days long,
aligned to 1970-01-01, each tagged by its first day (``2026-11-11`` for 2026-11-11 and 2026-11-12) on the
latest snapshot committed at or before 2026-11-13 02:30. One run per period (``TagPeriodTimetable``), started
when the tag is due; the sensor still checks the table's own options. Backfills tag past periods exactly as
live runs would have, and skip the expiry.

Configuration, without any I/O at parse time: ``params.table`` / ``params.paimon_conn_id`` (defaults from
``PAIMON_TWO_DAY_TAGS_TABLE``, default ``demo.orders_2d``, and ``PAIMON_CONN_ID``, default
``paimon_default``); ``PAIMON_TWO_DAY_TAGS_CREATE_TIME`` (default ``02:30``) and
``PAIMON_TWO_DAY_TAGS_TIMEZONE`` (default ``UTC``) for the schedule.
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

TABLE = os.environ.get("PAIMON_TWO_DAY_TAGS_TABLE", "demo.orders_2d")
CONN_ID = os.environ.get("PAIMON_CONN_ID", "paimon_default")
CREATE_TIME = os.environ.get("PAIMON_TWO_DAY_TAGS_CREATE_TIME", "02:30")
TIMEZONE = os.environ.get("PAIMON_TWO_DAY_TAGS_TIMEZONE", "UTC")

TABLE_ARGS = {"table": "{{ params.table }}", "paimon_conn_id": "{{ params.paimon_conn_id }}"}


def _not_a_backfill(dag_run=None, **_) -> bool:
    return getattr(dag_run, "run_type", None) != "backfill"


with DAG(
    dag_id="paimon_two_day_tags",
    description="Paimon tags every two days at 02:30, then expiry",
    schedule=TagPeriodTimetable(create_time=CREATE_TIME, interval="2d", timezone=TIMEZONE),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "table": Param(TABLE, type="string", description="The Paimon table, database.table"),
        "paimon_conn_id": Param(CONN_ID, type="string", description="The Paimon connection"),
    },
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["paimon", "tags"],
    doc_md=__doc__,
) as dag:
    wait_until_due = TagTimeSensor(
        task_id="wait_until_due",
        deferrable=True,
        poke_interval=60,
        timeout=timedelta(days=2),
        **TABLE_ARGS,
    )
    create_tag = CreateTagOperator(task_id="create_tag", **TABLE_ARGS)
    live_runs_only = ShortCircuitOperator(
        task_id="skip_expiry_in_backfills",
        python_callable=_not_a_backfill,
    )
    expire = ExpireSnapshotsOperator(task_id="expire_snapshots", max_active_tis_per_dag=1, **TABLE_ARGS)

    wait_until_due >> create_tag >> live_runs_only >> expire
