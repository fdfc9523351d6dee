"""Daily tags of a Paimon table, created when they are due, then snapshot and tag expiry.

One run per day (``TagPeriodTimetable``): the run of the period 2026-11-11 starts at 2026-11-12 + the
create-time, waits until the tag is due (``TagTimeSensor``: the table's own ``tag.create-time`` decides),
creates the tag ``2026-11-11`` on the latest snapshot committed at or before that instant, and expires
snapshots and tags by the table's retention options.

Backfills (Airflow UI, ``airflow backfill create`` or ``POST /api/v2/backfills``) tag past periods exactly as
live runs would have, in any order: the sensor passes at once and the tag's snapshot depends only on the
period. Backfill runs skip the expiry: it does not depend on the period, and it must not delete snapshots that
older periods of the same backfill still have to tag.

Configuration, without any I/O at parse time (the table may not exist yet):

* ``params.table`` / ``params.paimon_conn_id`` (a run's or a backfill's conf can override them); their
  defaults come from the environment variables ``PAIMON_DAILY_TAGS_TABLE`` (default ``demo.orders``) and
  ``PAIMON_CONN_ID`` (default ``paimon_default``);
* ``PAIMON_DAILY_TAGS_CREATE_TIME`` (default ``00:00``) and ``PAIMON_DAILY_TAGS_TIMEZONE`` (default ``UTC``):
  when runs start; set them to the table's ``tag.create-time`` and ``sink.process-time-zone``.
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

TABLE = os.environ.get("PAIMON_DAILY_TAGS_TABLE", "demo.orders")
CONN_ID = os.environ.get("PAIMON_CONN_ID", "paimon_default")
CREATE_TIME = os.environ.get("PAIMON_DAILY_TAGS_CREATE_TIME", "00:00")
TIMEZONE = os.environ.get("PAIMON_DAILY_TAGS_TIMEZONE", "UTC")

TABLE_ARGS = {"table": "{{ params.table }}", "paimon_conn_id": "{{ params.paimon_conn_id }}"}


def _not_a_backfill(dag_run=None, **_) -> bool:
    return getattr(dag_run, "run_type", None) != "backfill"


with DAG(
    dag_id="paimon_daily_tags",
    description="Daily Paimon tags at the table's create-time, then expiry",
    schedule=TagPeriodTimetable(create_time=CREATE_TIME, interval="1d", timezone=TIMEZONE),
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
        timeout=timedelta(days=1),
        **TABLE_ARGS,
    )
    create_tag = CreateTagOperator(task_id="create_tag", **TABLE_ARGS)
    live_runs_only = ShortCircuitOperator(
        task_id="skip_expiry_in_backfills",
        python_callable=_not_a_backfill,
    )
    expire = ExpireSnapshotsOperator(task_id="expire_snapshots", max_active_tis_per_dag=1, **TABLE_ARGS)

    wait_until_due >> create_tag >> live_runs_only >> expire
