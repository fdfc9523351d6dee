"""A daily MERGE into the tables view's test table: its commit is the snapshot the view links to this DAG's run."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from airflow_paimon.operators.merge import MergeIncrementalOperator

with DAG("paimon_ui_merge", schedule="@daily", start_date=pendulum.datetime(2026, 11, 1, tz="UTC"), catchup=False):
    MergeIncrementalOperator(task_id="merge", table=os.environ.get("PAIMON_UI_TABLE", "ui.orders"),
                             source=os.environ.get("PAIMON_UI_SOURCE", "/nonexistent"), engine="local")
