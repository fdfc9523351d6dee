"""The Paimon connection's secrets never reach the spark-submit command line, in any deploy mode, and the task's
result comes from the result file the application writes (never from spark-submit's output).

A fake ``spark-submit`` (an executable put first on PATH) records its argv, its environment and the spec file the
application would read, and answers like the application. Each Spark deploy mode is submitted through the real
operator and the Spark provider's real hook; the provider puts ``env_vars`` on the command line on YARN
(``spark.yarn.appMasterEnv.*``) and Kubernetes (``spark.kubernetes.driverEnv.*``), so nothing secret may travel
there either.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

SECRET = "fake-S3cret-value-42"
ENDPOINT = "http://minio.example:9000"

FAKE_SPARK_SUBMIT = r'''#!{python}
import json, os, sys

argv = sys.argv[1:]
entry = {"argv": argv, "env": dict(os.environ)}


def after(flag):
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


if "--spec-file" in argv:
    path = after("--spec-file")[-1]
    if not os.path.isabs(path):  # cluster mode: the file arrives with --files, under its own name
        shipped = [f for value in after("--files") for f in value.split(",")]
        path = next(f for f in shipped if os.path.basename(f) == path)
    entry["spec_path"] = path
    entry["spec_mode"] = os.stat(path).st_mode & 0o777
    entry["spec_dir_mode"] = os.stat(os.path.dirname(path)).st_mode & 0o777
    with open(path) as f:
        entry["spec"] = json.load(f)
else:
    entry["spec"] = json.loads(after("--spec")[-1])
result = {"status": "no_changes", "target": entry["spec"]["target"], "rows": 7}
entry["result_file"] = after("--result-file")[-1]
os.makedirs(os.path.dirname(entry["result_file"]), exist_ok=True)  # a warehouse folder in cluster mode
with open(entry["result_file"], "w") as f:
    json.dump(result, f)
# What the output says is not the result: the operator must not take it from there.
print("AIRFLOW_PAIMON_RESULT " + json.dumps(dict(result, rows=999)))
print("Exit code: 0")
with open(os.environ["FAKE_SPARK_RECORD"], "w") as f:
    json.dump(entry, f)
'''

MODES = {
    "local": (None, {}),
    "standalone-client": ({"conn_type": "spark", "host": "spark://master.example", "port": 7077}, {}),
    "yarn-client": ({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "client"}}, {}),
    "yarn-cluster": ({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}, {"durable": False}),
    "kubernetes-client": ({"conn_type": "spark", "host": "k8s://https://k8s.example", "port": 443,
                           "extra": {"deploy-mode": "client"}}, {}),
    "kubernetes-cluster": ({"conn_type": "spark", "host": "k8s://https://k8s.example", "port": 443,
                            "extra": {"deploy-mode": "cluster"}},
                           {"conf": {"spark.kubernetes.driver.secretKeyRef.AIRFLOW_PAIMON_CATALOG_OPTIONS":
                                     "paimon-options:options"}}),
}


@pytest.fixture
def fake_spark(tmp_path, monkeypatch):
    """A recording spark-submit first on PATH, a Paimon connection with a secret, and the record's path."""
    from airflow.providers.apache.spark.hooks import spark_submit

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "spark-submit"
    fake.write_text(FAKE_SPARK_SUBMIT.replace("{python}", sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "record.json"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SPARK_RECORD", str(record))
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", json.dumps(
        {"conn_type": "paimon", "login": "AKIAFAKE", "password": SECRET,
         "extra": {"warehouse": str(tmp_path / "wh"), "s3.endpoint": ENDPOINT}}))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    # The provider refuses k8s:// masters unless the Kubernetes provider is installed; it uses that client only
    # to watch driver pods through the API, which these submissions do not ask for.
    monkeypatch.setattr(spark_submit, "kube_client", types.SimpleNamespace(), raising=False)
    return record


def _context(run_id="manual__2026-11-15"):
    import pendulum

    ti = types.SimpleNamespace(dag_id="dag", task_id="merge", map_index=-1, try_number=1, run_id=run_id)
    return {"ti": ti, "run_id": run_id, "data_interval_start": pendulum.datetime(2026, 11, 14, tz="UTC"),
            "data_interval_end": pendulum.datetime(2026, 11, 15, tz="UTC")}


def _operator(mode, monkeypatch, **kwargs):
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    conn, extra = MODES[mode]
    if conn is not None:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps(conn))
    # engine="spark": what reaches spark-submit is the point here, not which engine auto would choose
    args = dict(task_id="merge", table="db.t", source="/in/2026-11-14", conn_id="spark_test", ship_package=False,
                engine="spark")
    args.update(extra)
    args.update(kwargs)
    return MergeIncrementalOperator(**args)


@pytest.mark.parametrize("mode", list(MODES))
def test_the_secret_is_on_no_command_line_and_the_application_gets_its_options(fake_spark, monkeypatch, mode):
    op = _operator(mode, monkeypatch)
    result = op.execute(_context())
    entry = json.loads(fake_spark.read_text())
    assert [a for a in entry["argv"] if SECRET in a] == []
    # Nothing added to the environment holds it either (the worker's own connection variable is inherited).
    assert [k for k, v in entry["env"].items() if SECRET in v and k != "AIRFLOW_CONN_PAIMON_DEFAULT"] == []
    spec = entry["spec"]
    assert spec["target"] == "db.t" and spec["source"] == "/in/2026-11-14" and spec["warehouse"].endswith("wh")
    assert spec["options"]["s3.endpoint"] == ENDPOINT
    if mode == "kubernetes-cluster":
        # No local file reaches a driver pod: the secret options come from the Kubernetes secret named in the
        # conf, the others travel in the spec.
        assert "s3.secret-key" not in spec["options"]
        assert ("spark.kubernetes.driver.secretKeyRef.AIRFLOW_PAIMON_CATALOG_OPTIONS=paimon-options:options"
                in entry["argv"])
    else:
        assert spec["options"]["s3.secret-key"] == SECRET and spec["options"]["s3.access-key"] == "AKIAFAKE"
        assert entry["spec_mode"] == 0o600 and entry["spec_dir_mode"] == 0o700
        assert not Path(entry["spec_path"]).exists()        # removed once spark-submit ended
        if mode == "yarn-cluster":
            assert entry["argv"][entry["argv"].index("--spec-file") + 1] == "airflow-paimon-spec.json"
            assert entry["spec_path"] in entry["argv"][entry["argv"].index("--files") + 1].split(",")
    assert result["status"] == "no_changes" and result["target"] == "db.t" and result["rows"] == 7
    # Client mode (the driver runs here): beside the spec, in the private folder. Cluster mode: under the
    # warehouse, which the driver on the cluster can reach. Either way it is gone once read.
    if mode.endswith("-cluster"):
        assert entry["result_file"].startswith(str(Path(spec["warehouse"]) / ".airflow-paimon" / "results"))
    else:
        assert Path(entry["result_file"]).parent == Path(entry["spec_path"]).parent
    assert not Path(entry["result_file"]).exists()


def test_kubernetes_cluster_mode_without_a_secret_for_the_options_is_refused(fake_spark, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    op = _operator("kubernetes-cluster", monkeypatch, conf={})
    with pytest.raises(AirflowFailException, match=r"holds secrets \(s3.secret-key\).*spark.kubernetes.driver."
                                                   r"secretKeyRef.AIRFLOW_PAIMON_CATALOG_OPTIONS"):
        op.execute(_context())
    assert not fake_spark.exists()


def test_standalone_cluster_mode_is_refused_before_anything_is_submitted(fake_spark, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps(
        {"conn_type": "spark", "host": "spark://master.example", "port": 7077, "extra": {"deploy-mode": "cluster"}}))
    from airflow_paimon.operators.merge import MergeIncrementalOperator

    op = MergeIncrementalOperator(task_id="merge", table="db.t", source="/in", conn_id="spark_test", engine="spark")
    with pytest.raises(AirflowFailException, match="cannot run Python applications on a standalone cluster"):
        op.execute(_context())
    assert not fake_spark.exists()
