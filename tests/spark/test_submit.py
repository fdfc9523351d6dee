"""The bundled applications through real spark-submit: a killed merge commits nothing, and the package ships as
a --py-files zip to executors (local-cluster mode) whose Python does not have it installed."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.spark.common import INPUT_ERROR_EXIT, RESULT_PREFIX, application_path, parse_result, py_files_zip

from .reference import canonical
from .test_merge import SCHEMA, make_target, row

pytestmark = pytest.mark.spark

BIN = Path(sys.executable).parent


def spark_submit(app: str, spec: dict, master: str = "local[1]", conf: dict | None = None, env: dict | None = None,
                 py_files: str | None = None, wait: bool = True, **popen):
    cmd = [str(BIN / "spark-submit"), "--master", master, "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=4", "--driver-memory", "1g"]
    for k, v in (conf or {}).items():
        cmd += ["--conf", f"{k}={v}"]
    if py_files:
        cmd += ["--py-files", py_files]
    cmd += [application_path(app), "--spec", json.dumps(spec)]
    environ = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    environ.update(env or {})
    if not wait:
        return subprocess.Popen(cmd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, **popen)
    proc = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=600, **popen)
    return proc


def _data_files(path: str) -> set[str]:
    out = set()
    for root, _, names in os.walk(path):
        for n in names:
            if n.startswith("data-") and n.endswith(".parquet"):
                out.add(os.path.join(root, n))
    return out


def test_a_killed_merge_leaves_the_table_as_it_was(warehouse, tmp_path):
    cat = warehouse
    t = make_target(cat, bucket=16, rows=[row(i) for i in range(100)])
    before = t.read().to_pylist()
    snaps = [s.id for s in t.snapshots()]
    n = 800_000
    ids = np.arange(n, dtype=np.int64)
    src = pa.table({"id": ids, "dt": pa.array(np.where(ids % 2 == 0, "2026-11-01", "2026-11-02")),
                    "name": pa.array(ids.astype(str)), "amount": ids.astype(np.float64),
                    "status": pa.array(np.where(ids % 3 == 0, "open", "closed")),
                    "updated_at": pa.array(ids * 1000, pa.timestamp("us"))})
    pq.write_table(src, tmp_path / "big.parquet")
    files_before = _data_files(t.path)
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": str(tmp_path / "big.parquet"),
            "commit_user": "killed", "commit_identifier": 1, "num_tasks": 16}
    proc = spark_submit("merge_app", spec, master="local[1]", wait=False)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if _data_files(t.path) - files_before:
                break
            if proc.poll() is not None:
                pytest.fail("the merge finished before it could be killed:\n" + proc.stdout.read()[-3000:])
            time.sleep(0.02)
        else:
            pytest.fail("the merge wrote no file within 300 s")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    t = cat.get_table("db.t")
    assert [s.id for s in t.snapshots()] == snaps
    assert canonical(t.read().to_pylist(), ["id"]) == canonical(before, ["id"])
    written = _data_files(t.path) - files_before
    assert written, "the killed job wrote files (orphans now)"
    # They are orphans: cleanup (safety age 0 here) removes exactly them and the table still reads the same.
    result = t.maintenance.remove_orphan_files(older_than=dt.timedelta(0))
    assert set(result.paths) >= written
    assert not (_data_files(t.path) - files_before)
    assert canonical(cat.get_table("db.t").read().to_pylist(), ["id"]) == canonical(before, ["id"])
    # The same merge run again to the end commits once.
    done = spark_submit("merge_app", dict(spec, num_tasks=4))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = parse_result(done.stdout.splitlines())
    assert result["status"] == "committed"
    assert cat.get_table("db.t").read().num_rows == n  # the 100 old ids are all among the source ids


def test_bad_input_exits_65_with_a_clear_message(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    pq.write_table(pa.Table.from_pylist([row(1, 1), row(1, 2)], schema=SCHEMA), tmp_path / "dup.parquet")
    proc = spark_submit("merge_app", {"target": "db.t", "warehouse": cat.warehouse,
                                      "source": str(tmp_path / "dup.parquet")})
    assert proc.returncode == INPUT_ERROR_EXIT == 65               # a crash exits 1: retrying may help there
    # spark-submit passes the application's stderr on to its stdout.
    message = next(x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith("ERROR "))
    assert "DuplicateKeyError" in message and "id=1" in message and "Nothing was committed" in message
    assert parse_result(proc.stdout.splitlines())["status"] == "failed"
    assert len(cat.get_table("db.t").snapshots()) == 1


def _python_without_the_package(tmp_path: Path) -> str:
    """A venv whose Python sees this environment's libraries (pyarrow, numpy, fastavro, pyspark) but not the
    editable airflow_paimon install (site .pth files of a directory added by a .pth are not processed)."""
    venv = tmp_path / "exec-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    main_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "main-libs.pth").write_text(main_site + "\n")
    python = str(venv / "bin" / "python")
    probe = "import pyarrow, fastavro, numpy, pyspark\ntry:\n import airflow_paimon\n print('HAS')\n" \
            "except ImportError:\n print('NO')"
    check = subprocess.run([python, "-c", probe],
                           capture_output=True, text=True, cwd=str(tmp_path))
    assert check.stdout.strip() == "NO", check.stdout + check.stderr
    return python


def test_package_ships_as_py_files_zip_to_a_cluster(warehouse, tmp_path):
    cat = warehouse
    make_target(cat, bucket=2, rows=[row(i) for i in range(20)])
    before = cat.get_table("db.t").read().to_pylist()
    python = _python_without_the_package(tmp_path)
    source = [row(i, 1) for i in range(10, 30)]
    pq.write_table(pa.Table.from_pylist(source, schema=SCHEMA), tmp_path / "src.parquet")
    zipped = py_files_zip(str(tmp_path / "zips"))
    assert py_files_zip(str(tmp_path / "zips")) == zipped   # cached by content
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": str(tmp_path / "src.parquet"),
            "clauses": [{"when": "matched", "action": "update", "set": "*", "condition": "s.amount > t.amount"},
                        {"when": "not_matched", "action": "insert", "values": "*"}],
            "commit_user": "cluster", "commit_identifier": 5}
    proc = spark_submit("merge_app", spec, master="local-cluster[1,1,1024]",
                        conf={"spark.pyspark.python": python, "spark.pyspark.driver.python": python,
                              "spark.executor.memory": "768m"},
                        env={"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
                        py_files=zipped, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    result = parse_result(proc.stdout.splitlines())
    assert result["status"] == "committed" and result["mode"] == "merge"
    expected = {r["id"]: r for r in before}
    for s in source:
        if s["id"] not in expected or s["amount"] > expected[s["id"]]["amount"]:
            expected[s["id"]] = s
    assert canonical(cat.get_table("db.t").read().to_pylist(), ["id"]) == canonical(list(expected.values()), ["id"])
    assert RESULT_PREFIX.strip() in proc.stdout


def test_a_small_upsert_never_starts_a_spark_context(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    pq.write_table(pa.Table.from_pylist([row(i, 1) for i in range(30, 50)], schema=SCHEMA), tmp_path / "s.parquet")
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": str(tmp_path / "s.parquet"),
            "commit_user": "u", "commit_identifier": 1}
    started = "SparkContext: Running Spark version"
    seen = {}
    for ident, extra in ((1, {}), (2, {"driver_bytes": 0})):
        proc = spark_submit("merge_app", dict(spec, commit_identifier=ident, **extra))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        result = parse_result(proc.stdout.splitlines())
        seen[result["engine"]] = started in proc.stdout + proc.stderr
    assert seen == {"driver": False, "spark": True}
    assert cat.get_table("db.t").latest_snapshot().id == 3
