"""One surface for every operator and sensor: the table is ``table=`` everywhere (``target=`` still works on the
Spark operators, with a deprecation warning), ``dry_run=`` never hides ``BaseOperator.dry_run()``, and the Spark
operators build their hook as the Spark provider's operator builds its own."""

from __future__ import annotations

import inspect
import json
import warnings

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_paimon.hooks.spark_submit import PaimonSparkSubmitHook
from airflow_paimon.operators import (
    CompactOperator,
    CreateTagOperator,
    DeleteTagOperator,
    ExpireSnapshotsOperator,
    MergeIncrementalOperator,
    RemoveOrphanFilesOperator,
    RollbackOperator,
)
from airflow_paimon.sensors import TagSensor, TagTimeSensor

pytestmark = pytest.mark.airflow

EVERY_TABLE_TASK = [CreateTagOperator, DeleteTagOperator, RollbackOperator, ExpireSnapshotsOperator,
                    MergeIncrementalOperator, CompactOperator, RemoveOrphanFilesOperator, TagSensor, TagTimeSensor]
SPARK_OPERATORS = {
    MergeIncrementalOperator: {"source": "/in"},
    CompactOperator: {},
    RemoveOrphanFilesOperator: {},
}


@pytest.mark.parametrize("task", EVERY_TABLE_TASK, ids=lambda t: t.__name__)
def test_every_operator_and_sensor_names_its_table_table(task):
    assert "table" in inspect.signature(task.__init__).parameters
    assert "table" in task.template_fields and "target" not in task.template_fields


@pytest.mark.parametrize("operator", list(SPARK_OPERATORS), ids=lambda t: t.__name__)
def test_target_is_a_deprecated_name_of_table_and_still_works(operator):
    extra = SPARK_OPERATORS[operator]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the current name warns about nothing
        current = operator(task_id="t", table="db.t", **extra)
    with pytest.warns(AirflowProviderDeprecationWarning, match=r"target= is deprecated; use table="):
        old = operator(task_id="t", target="db.t", **extra)
    assert old.table == current.table == "db.t"
    with pytest.warns(AirflowProviderDeprecationWarning):  # templated as before, and checked under its new name
        templated = operator(task_id="t", target="{{ params.table }}", **extra)
    assert templated.table == "{{ params.table }}"
    with pytest.warns(AirflowProviderDeprecationWarning), pytest.raises(ValueError, match=r"table: 'orders'"):
        operator(task_id="t", target="orders", **extra)
    with pytest.raises(TypeError, match="give the table once"):
        operator(task_id="t", table="db.t", target="db.t", **extra)


@pytest.mark.parametrize("operator, kwargs", [
    (DeleteTagOperator, {"tag_name": "x"}),
    (RollbackOperator, {"to_snapshot": 1}),
    (ExpireSnapshotsOperator, {}),
    (RemoveOrphanFilesOperator, {}),
], ids=lambda v: getattr(v, "__name__", ""))
def test_dry_run_argument_leaves_the_base_operators_dry_run_method(operator, kwargs):
    op = operator(task_id="t", table="db.t", dry_run=True, **kwargs)
    assert op.is_dry_run is True
    op.dry_run()  # Airflow's own "render the templates only" still works


def test_the_spark_hook_is_built_from_the_operators_arguments_like_the_providers(monkeypatch):
    """Every argument of SparkSubmitHook is passed (a provider release adding one fails here), and the hook
    equals the one the provider's own operator would build, apart from its class."""
    hook_parameters = set(inspect.signature(SparkSubmitHook.__init__).parameters) - {"self"}
    op = CompactOperator(task_id="t", table="db.t", conn_id="spark_cluster", conf={"spark.x": "1"},
                         executor_memory="3g", num_executors=4, deploy_mode="client", name="job")
    assert set(op.spark_hook_arguments()) == hook_parameters
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER",
                       json.dumps({"conn_type": "spark", "host": "spark://m", "port": 7077}))
    ours, providers = op._get_hook(), SparkSubmitOperator._get_hook(op)
    assert type(ours) is PaimonSparkSubmitHook and type(providers) is SparkSubmitHook
    assert set(vars(ours)) == set(vars(providers))
    different = {k for k in vars(ours) if k != "_last_submit_log_lines" and vars(ours)[k] != vars(providers)[k]}
    assert different == set()
    assert ours.master == "spark://m:7077" and not ours.is_local and not ours.driver_runs_remotely


def test_without_a_spark_connection_spark_runs_locally(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    hook = CompactOperator(task_id="t", table="db.t")._get_hook()
    assert hook.master == "local[*]" and hook.is_local and hook.on_this_machine
    assert not (hook.on_yarn or hook.on_kubernetes or hook.driver_runs_remotely)
    # The provider's own flags agree with the local master: they were derived from it at construction.
    assert not hook._is_yarn_cluster_mode and not hook._should_track_driver_status


def _table_with_a_stray_file(cat, name):
    import os
    import time

    import pyarrow as pa

    t = cat.create_table(name, pa.schema([("id", pa.int64())]), primary_keys=["id"])
    t.write(pa.table({"id": [1, 2]}))
    stray = f"{t.bucket_dir((), 0)}/data-stray.parquet"
    with open(stray, "wb") as f:
        f.write(b"not referenced by any snapshot")
    old = time.time() - 5 * 86400
    os.utime(stray, (old, old))
    return stray


@pytest.mark.spark
def test_orphan_cleanup_returns_one_xcom_shape_on_spark_and_in_the_worker(tmp_path, monkeypatch):
    """The XCom is the library's orphan result (``OrphanResult.to_dict``) whether Spark or the worker ran it."""
    import os
    import types

    from airflow_paimon.format import Catalog
    from airflow_paimon.format.upkeep.orphans import MAX_LISTED_FILES

    warehouse = str(tmp_path / "wh")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", json.dumps({"conn_type": "paimon",
                                                                  "extra": {"warehouse": warehouse}}))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    cat = Catalog(warehouse)
    cat.create_database("db")
    strays = {name: _table_with_a_stray_file(cat, name) for name in ("db.spark", "db.worker")}
    ti = types.SimpleNamespace(dag_id="dag", task_id="orphans", map_index=-1, try_number=1, run_id="manual__x")
    context = {"ti": ti, "run_id": "manual__x"}
    spark_args = {"conf": {"spark.ui.enabled": "false"}, "driver_memory": "1g"}

    def run(name, use_spark, dry_run):
        op = RemoveOrphanFilesOperator(task_id="orphans", table=name, use_spark=use_spark, dry_run=dry_run,
                                       **(spark_args if use_spark else {}))
        return op.execute(context)

    library = cat.get_table("db.spark").maintenance.remove_orphan_files(dry_run=True).to_dict(MAX_LISTED_FILES)
    on_spark, in_worker = run("db.spark", True, True), run("db.worker", False, True)
    assert set(on_spark) == set(in_worker) == set(library)
    varying = {"seconds", "listing_units", "target", "files", "older_than"}
    assert {k: v for k, v in on_spark.items() if k not in varying} == \
        {k: v for k, v in in_worker.items() if k not in varying}
    assert on_spark["files"] == [strays["db.spark"]] and in_worker["files"] == [strays["db.worker"]]
    assert on_spark["status"] == "dry_run" and on_spark["bytes_freed"] == len(b"not referenced by any snapshot")

    on_spark, in_worker = run("db.spark", True, False), run("db.worker", False, False)
    assert set(on_spark) == set(in_worker) == set(library)
    assert {k: v for k, v in on_spark.items() if k not in varying} == \
        {k: v for k, v in in_worker.items() if k not in varying}
    assert on_spark["status"] == "deleted" and on_spark["files_deleted"] == 1
    assert not any(os.path.exists(p) for p in strays.values())
