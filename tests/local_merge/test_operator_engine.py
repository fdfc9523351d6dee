"""MergeIncrementalOperator(engine=...) merging in the worker: the XCom and the log say which engine ran and why."""

from __future__ import annotations

import json
import types

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.airflow

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.float64())])


@pytest.fixture
def warehouse(monkeypatch, tmp_path):
    from airflow_paimon.format import Catalog

    wh = str(tmp_path / "wh")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", json.dumps({"conn_type": "paimon", "extra": {"warehouse": wh}}))
    cat = Catalog(wh)
    cat.create_database("db")
    cat.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2"}).write(
        pa.table({"id": [1, 2, 3], "v": [1.0, 2.0, 3.0]}, schema=SCHEMA))
    return cat


def context(try_number=1):
    ti = types.SimpleNamespace(dag_id="dag", task_id="merge", map_index=-1, try_number=try_number)
    return {"ti": ti, "data_interval_start": pendulum.parse("2026-11-14"),
            "data_interval_end": pendulum.parse("2026-11-15"), "run_id": "manual__x"}


def test_auto_merges_in_the_worker_exactly_once(warehouse, tmp_path, capsys):
    from airflow_paimon.merge import matched_update, not_matched_insert
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    path = str(tmp_path / "day.parquet")
    pq.write_table(pa.table({"id": [2, 9], "v": [20.0, 90.0]}), path)
    op = MergeIncrementalOperator(task_id="merge", table="db.t", source=path,
                                  clauses=[matched_update(condition="s.v > t.v"), not_matched_insert()])
    out = op.execute(context())
    assert out["engine"] == "local" and out["status"] == "committed" and "budget" in out["engine_reason"]
    assert "MERGE into db.t in the worker's process, as the MERGE needs about" in capsys.readouterr().out
    assert {r["id"]: r["v"] for r in warehouse.get_table("db.t").read().to_pylist()} == {1: 1.0, 2: 20.0, 3: 3.0,
                                                                                       9: 90.0}
    assert op.execute(context(try_number=2))["status"] == "already_committed"


def test_engine_is_checked_when_the_dag_is_parsed():
    from airflow_paimon.arguments import ArgumentError
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    with pytest.raises(ArgumentError, match="engine"):
        MergeIncrementalOperator(task_id="merge", table="db.t", source="/x", engine="duckdb")


def test_bad_input_fails_the_task_without_retries(warehouse, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_paimon.merge import matched_update
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    path = str(tmp_path / "day.parquet")
    pq.write_table(pa.table({"id": [2, 2], "v": [20.0, 21.0]}), path)
    op = MergeIncrementalOperator(task_id="merge", table="db.t", source=path, engine="local",
                                  clauses=[matched_update(condition="s.v > t.v")])
    with pytest.raises(AirflowFailException, match="several rows for one target primary key.*not retried"):
        op.execute(context())
    assert warehouse.get_table("db.t").latest_snapshot().id == 1


def test_a_commit_emits_the_tables_asset_event_through_the_commit_alias(warehouse, tmp_path):
    """As Airflow's task runner does: execute, then post_execute with the same context."""
    from airflow.sdk import AssetAlias
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_paimon.assets import table_asset
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    path = str(tmp_path / "day.parquet")
    pq.write_table(pa.table({"id": [4], "v": [4.0]}), path)
    op = MergeIncrementalOperator(task_id="merge", table="db.t", source=path, engine="local")
    assert AssetAlias(name="paimon_commits") in op.outlets
    ctx = dict(context(), outlet_events=OutletEventAccessors())
    out = op.execute(ctx)
    op.post_execute(ctx)
    [event] = ctx["outlet_events"][AssetAlias(name="paimon_commits")].asset_alias_events
    expected = table_asset(warehouse.warehouse, "db.t")
    assert (event.dest_asset_key.name, event.dest_asset_key.uri) == (expected.name, expected.uri)
    assert event.extra["snapshot_id"] == out["snapshot_id"] == warehouse.get_table("db.t").latest_snapshot().id
    assert event.extra["operator"] == "MergeIncrementalOperator" and event.extra["table"] == "db.t"
    # A retry that finds its commit emits nothing: the snapshot's event was emitted by the run that made it.
    again = dict(context(try_number=2), outlet_events=OutletEventAccessors())
    assert op.execute(again)["status"] == "already_committed"
    op.post_execute(again)
    assert again["outlet_events"][AssetAlias(name="paimon_commits")].asset_alias_events == []


def test_an_append_table_with_deletion_vectors_is_merged_in_the_worker(warehouse, tmp_path):
    from airflow_paimon.merge import matched_delete, not_matched_insert
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    events = warehouse.create_table("db.events", SCHEMA, options={"deletion-vectors.enabled": "true"})
    events.write(pa.table({"id": [1, 2, 2], "v": [1.0, 2.0, 2.5]}, schema=SCHEMA))
    path = str(tmp_path / "day.parquet")
    pq.write_table(pa.table({"id": [2, 9], "v": [0.0, 90.0]}), path)
    op = MergeIncrementalOperator(task_id="merge", table="db.events", source=path, on=["id"],
                                  clauses=[matched_delete(), not_matched_insert()])
    out = op.execute(context())
    assert out["engine"] == "local" and out["rows"] == {"inserted": 1, "updated": 0, "deleted": 2}
    assert sorted(r["id"] for r in events.read().to_pylist()) == [1, 9]
    assert op.execute(context(try_number=2))["status"] == "already_committed"
