"""Export each day's changed rows of a Paimon table as Parquet, one folder per period.

``paimon_export_changes`` runs once a day at the table's ``tag.create-time``: it waits until the period's tag is
due, creates it (``CreateTagOperator``), then writes the rows that changed between the previous periodic tag and
this one (``ExportChangesOperator(period=True)``) to ``<PAIMON_EXPORT_PATH>/<table>/<period's first day>/``.
The folder is complete when its ``_SUCCESS`` manifest exists; a re-run (or a backfill) of a period replaces its
folder. Backfills may run periods in any order (newest first, several at once): a period whose previous period
is not tagged yet starts at the snapshot that tag will hold, so each folder holds exactly its period's changes.

Configuration, without any I/O at parse time: ``params.table`` / ``params.paimon_conn_id`` / ``params.path``
(defaults from ``PAIMON_EXPORT_TABLE`` (``demo.orders``), ``PAIMON_CONN_ID`` and ``PAIMON_EXPORT_PATH``
(``/tmp/paimon-exports``)), and ``PAIMON_EXPORT_CREATE_TIME`` / ``PAIMON_EXPORT_TIMEZONE`` (the table's
``tag.create-time`` and ``sink.process-time-zone``; defaults ``00:00`` and ``UTC``).

``paimon_export_tagged_changes`` does the same work driven by data instead of the clock: it is scheduled on the
asset events ``CreateTagOperator`` emits (through the alias ``paimon_tags``), whose ``extra`` names the table,
the new tag and the previous periodic tag, and exports ``(previous_tag, tag]``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, AssetAlias, Param, task

from airflow_paimon.operators import CreateTagOperator, ExportChangesOperator
from airflow_paimon.operators.tags import DEFAULT_ASSET_ALIAS
from airflow_paimon.sensors import TagTimeSensor
from airflow_paimon.timetables import TagPeriodTimetable

TABLE = "{{ params.table }}"
CONN_ID = "{{ params.paimon_conn_id }}"

with DAG(
    dag_id="paimon_export_changes",
    description="Each period's changed rows of a Paimon table as Parquet, one complete folder per period",
    schedule=TagPeriodTimetable(create_time=os.environ.get("PAIMON_EXPORT_CREATE_TIME", "00:00"), interval="1d",
                                timezone=os.environ.get("PAIMON_EXPORT_TIMEZONE", "UTC")),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "table": Param(os.environ.get("PAIMON_EXPORT_TABLE", "demo.orders"), type="string"),
        "paimon_conn_id": Param(os.environ.get("PAIMON_CONN_ID", "paimon_default"), type="string"),
        "path": Param(os.environ.get("PAIMON_EXPORT_PATH", "/tmp/paimon-exports"), type="string",
                      description="the exports' root folder or object-store URI"),
    },
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["paimon", "changes"],
    doc_md=__doc__,
) as dag:
    wait_until_due = TagTimeSensor(task_id="wait_until_due", table=TABLE, paimon_conn_id=CONN_ID, deferrable=True,
                                   poke_interval=60, timeout=timedelta(days=1))
    create_tag = CreateTagOperator(task_id="create_tag", table=TABLE, paimon_conn_id=CONN_ID, max_active_tis_per_dag=1)
    export = ExportChangesOperator(
        task_id="export_changes",
        table=TABLE,
        paimon_conn_id=CONN_ID,
        period=True,
        path="{{ params.path }}/{{ params.table }}/{{ data_interval_start | ds }}",
    )
    wait_until_due >> create_tag >> export


with DAG(
    dag_id="paimon_export_tagged_changes",
    description="Each new periodic tag's changes as Parquet, scheduled on CreateTagOperator's asset events",
    schedule=[AssetAlias(DEFAULT_ASSET_ALIAS)],
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    params={"path": Param(os.environ.get("PAIMON_EXPORT_PATH", "/tmp/paimon-exports"), type="string",
                          description="the exports' root folder or object-store URI")},
    tags=["paimon", "changes", "assets"],
    doc_md="""Runs whenever ``CreateTagOperator`` (in any DAG) emits its table's asset event through the alias
``paimon_tags``, and exports that period's changes: ``(previous_tag, tag]`` from the event's ``extra`` (an empty
export for the first period, which has no earlier tag, as Paimon's ``incremental-to-auto-tag`` answers) to
``<path>/<table>/<tag>/``.""",
) as tagged_dag:

    @task
    def tagged_period(triggering_asset_events: Any = None) -> dict[str, Any]:
        """The newest tag event's table and range (runs of several events export the newest period; the earlier
        ones are in their own tags and can be exported by re-running with their range)."""
        events = [event for events in (triggering_asset_events or {}).values() for event in events
                  if (event.extra or {}).get("tag")]
        if not events:
            raise ValueError("the run was not triggered by a tag's asset event (extra without 'tag')")
        extra = max(events, key=lambda event: event.timestamp).extra
        return {"table": extra["table"], "tag": extra["tag"],
                "start": extra["previous_tag"] or extra["tag"]}

    period = tagged_period()
    PERIOD = "ti.xcom_pull(task_ids='tagged_period')"
    export_tagged = ExportChangesOperator(
        task_id="export_changes",
        table="{{ %s['table'] }}" % PERIOD,
        start="{{ %s['start'] }}" % PERIOD,
        end="{{ %s['tag'] }}" % PERIOD,
        path="{{ params.path }}/{{ %s['table'] }}/{{ %s['tag'] }}" % (PERIOD, PERIOD),
    )
    period >> export_tagged
