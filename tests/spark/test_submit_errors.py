"""How a merge submitted through real spark-submit fails: a refused input fails the task without retries, with
the application's own one-line error first; a killed JVM stays an ordinary (retryable) failure."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import types

import pendulum
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .test_merge import SCHEMA, make_target, row

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture
def target(warehouse, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", json.dumps(
        {"conn_type": "paimon", "extra": {"warehouse": warehouse.warehouse}}))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    make_target(warehouse)
    return warehouse


def _context():
    ti = types.SimpleNamespace(dag_id="dag", task_id="merge", map_index=-1, try_number=1, run_id="manual__x")
    return {"ti": ti, "run_id": "manual__x", "data_interval_start": pendulum.datetime(2026, 11, 14, tz="UTC"),
            "data_interval_end": pendulum.datetime(2026, 11, 15, tz="UTC")}


def _operator(source, **kwargs):
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    return MergeIncrementalOperator(task_id="merge", table="db.t", source=source, conf=conf, driver_memory="1g",
                                    engine="spark", **kwargs)


def _write(tmp_path, rows, name="src.parquet"):
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / name)
    return str(tmp_path / name)


CASES = {
    "duplicate keys": (lambda p: _write(p, [row(1, 1), row(1, 2)]), {},
                       r"DuplicateKeyError: .*duplicate: id=1\)"),
    "missing folder": (lambda p: str(p / "no-such-day"), {}, r"AnalysisException: \[PATH_NOT_FOUND\]"),
    "missing column": (lambda p: _write(p, [row(1, 1)]),
                       {"clauses": [{"when": "matched", "action": "update", "set": "*", "condition": "s.op <> 'D'"}]},
                       r"AnalysisException: \[FIELD_NOT_FOUND\] No such struct field `op`"),
    # A clause that does not parse is refused when the DAG is parsed (tests/airflow/test_argument_checks.py);
    # one that parses but names no function Spark knows is refused by the application.
    "unknown function in a clause": (lambda p: _write(p, [row(1, 1)]),
                                     {"clauses": [{"when": "matched", "action": "update", "set": "*",
                                                   "condition": "no_such_function(s.amount) > 1"}]},
                                     r"AnalysisException: \[UNRESOLVED_ROUTINE\]"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_input_fails_without_retries_with_the_applications_error_first(target, tmp_path, case):
    from airflow.sdk.exceptions import AirflowFailException

    make_source, kwargs, message = CASES[case]
    op = _operator(make_source(tmp_path), **kwargs)
    with pytest.raises(AirflowFailException) as failed:
        op.execute(_context())
    text = str(failed.value)
    assert "\n" not in text and not text.startswith("Cannot execute")
    assert re.match(message, text), text
    assert "refused its input; the task is not retried" in text
    assert len(target.get_table("db.t").snapshots()) == 1


def test_a_killed_jvm_stays_a_retryable_failure(target, tmp_path):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    op = _operator(_write(tmp_path, [row(i, 1) for i in range(10)]), driver_bytes=0)
    outcome: dict = {}

    def run() -> None:
        try:
            op.execute(_context())
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    killed = False
    deadline = time.monotonic() + 240
    while thread.is_alive() and time.monotonic() < deadline and not killed:
        submit = getattr(op._hook, "_submit_sp", None) if op._hook is not None else None
        if submit is not None and submit.poll() is None:
            try:
                jvm = psutil.Process(submit.pid)
                started = any("merge_app.py" in " ".join(c.cmdline()) for c in jvm.children(recursive=True))
            except psutil.Error:
                started = False
            if started:   # the application runs: kill the JVM under it
                jvm.send_signal(signal.SIGKILL)
                killed = True
        time.sleep(0.05)
    thread.join(timeout=240)
    assert killed, "the application never started"
    error = outcome.get("error")
    assert isinstance(error, AirflowException) and not isinstance(error, AirflowFailException), error
    assert len(target.get_table("db.t").snapshots()) == 1
