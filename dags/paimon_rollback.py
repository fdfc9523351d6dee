"""Roll a Paimon table back, on demand: trigger ``paimon_rollback`` with a conf naming exactly one target.

* ``{"tag": "2026-11-20"}``: back to that tag; a tag that no longer exists fails the run (it is never read as a
  date, although periodic tag names look like one);
* ``{"snapshot": 42}``: back to that snapshot id;
* ``{"time": "2026-11-20 02:00:00+00:00"}``: back to the snapshot current at that time; refused when that
  snapshot has expired and no tag provably holds it (the error names the closest tag), and for a future time.

``table`` and ``paimon_conn_id`` default to ``PAIMON_ROLLBACK_TABLE`` (``demo.orders``) and ``PAIMON_CONN_ID``.
Newer snapshots and tags are deleted with the files only they used; ``dry_run: true`` only reports them.
No schedule: a rollback is a decision, never a routine.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param

from airflow_paimon.operators import RollbackOperator

with DAG(
    dag_id="paimon_rollback",
    description="Roll a Paimon table back to a tag, a snapshot or a point in time",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "table": Param(os.environ.get("PAIMON_ROLLBACK_TABLE", "demo.orders"), type="string"),
        "paimon_conn_id": Param(os.environ.get("PAIMON_CONN_ID", "paimon_default"), type="string"),
        "tag": Param("", type="string", description="roll back to this tag"),
        "snapshot": Param("", type=["string", "integer"], description="or to this snapshot id"),
        "time": Param("", type="string", description="or to the snapshot current at this ISO 8601 time"),
        "dry_run": Param(False, type="boolean", description="only report what would be deleted"),
    },
    tags=["paimon"],
) as dag:
    RollbackOperator(
        task_id="rollback",
        table="{{ params.table }}",
        paimon_conn_id="{{ params.paimon_conn_id }}",
        to_tag="{{ params.tag }}",
        to_snapshot="{{ params.snapshot }}",
        to_time="{{ params.time }}",
        dry_run="{{ params.dry_run }}",
    )
