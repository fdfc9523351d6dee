"""DAGs the end-to-end test runs next to the repository's dags/ (copied into the test's DAG folder).

* ``paimon_e2e_downstream``: scheduled on the asset of the daily-tags table (``paimon_table_asset``, the
  connection read from the environment while parsing): every tag the periodic-tags DAG creates triggers it.
* ``paimon_e2e_late_table``: a TagTimeSensor in each mode (deferrable, in the triggerer; poke, in a worker) for
  a table that does not exist when the run starts.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from airflow_paimon.assets import paimon_table_asset
from airflow_paimon.sensors import TagTimeSensor

TABLE = os.environ.get("PAIMON_DAILY_TAGS_TABLE", "demo.orders")
LATE_TABLE = os.environ.get("PAIMON_E2E_LATE_TABLE", "demo.late")


def _tags_of_the_events(triggering_asset_events=None, **_) -> list[str]:
    return sorted(str(e.extra.get("tag")) for events in (triggering_asset_events or {}).values() for e in events)


with DAG("paimon_e2e_downstream", schedule=[paimon_table_asset(TABLE)], start_date=pendulum.datetime(2024, 1, 1),
         catchup=False, tags=["paimon", "e2e"]):
    PythonOperator(task_id="read_tags", python_callable=_tags_of_the_events)

with DAG("paimon_e2e_late_table", schedule=None, start_date=pendulum.datetime(2024, 1, 1), catchup=False,
         tags=["paimon", "e2e"]):
    TagTimeSensor(task_id="wait_deferred", table=LATE_TABLE, deferrable=True, poke_interval=3, timeout=900)
    TagTimeSensor(task_id="wait_poking", table=LATE_TABLE, deferrable=False, mode="poke", poke_interval=3,
                  timeout=900)
