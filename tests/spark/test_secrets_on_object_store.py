"""The S3 secret key of a ``paimon`` connection never shows where other users or readers of Airflow could see it.

One real compaction on Spark (``CompactOperator``, real spark-submit, ``local[2]``) of a table on the local S3
server, run by ``dag.test()`` in a fresh Airflow on SQLite. While the application runs, ``ps -eww -o args`` is
sampled (every process's command line, which any user of the machine may read) and the live Spark UI's REST API is asked
for the application's environment page; afterwards the task's log, its XCom, its rendered template fields in the
metadata database and Spark's event log (what the history server shows) are read. The secret, a random string,
must appear in none of them.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.objectstore]

BIN = Path(sys.executable).parent
APP = str(Path(__file__).resolve().parents[2] / "airflow_paimon" / "spark" / "compact_app.py")

DAG_FILE = r'''
import os

import pendulum
from airflow.sdk import DAG

from airflow_paimon.operators.maintenance import CompactOperator

with DAG("secret_check", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC"), catchup=False):
    CompactOperator(task_id="compact", table="db.orders", engine="spark", ship_package=False,
                    conf={"spark.ui.enabled": "true", "spark.ui.port": os.environ["SECRET_CHECK_UI_PORT"],
                          "spark.port.maxRetries": "0", "spark.eventLog.enabled": "true",
                          "spark.eventLog.dir": os.environ["SECRET_CHECK_EVENT_LOG"],
                          "spark.eventLog.compress": "false", "spark.sql.shuffle.partitions": "2"})
'''

RUNNER = r"""
import json, sys
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow.models.renderedtifields import RenderedTaskInstanceFields
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select

bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
dag = bag.dags["secret_check"]
dr = dag.test(logical_date=pendulum.datetime(2026, 11, 20, tz="UTC"))
with create_session() as session:
    session.add(dr)
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances(session=session)}
    xcoms = [str(v) for (v,) in session.execute(select(XComModel.value).where(XComModel.run_id == dr.run_id))]
    rendered = [json.dumps(r, default=str) for (r,) in session.execute(
        select(RenderedTaskInstanceFields.rendered_fields).where(RenderedTaskInstanceFields.run_id == dr.run_id))]
print("SECRET_CHECK_RESULT " + json.dumps({"state": str(dr.state), "tasks": states, "xcoms": xcoms,
                                           "rendered": rendered}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Watcher(threading.Thread):
    """Samples every command line (``ps -eww -o args``: whole lines) and, once the Spark UI answers, the application's
    environment page, until stopped."""

    def __init__(self, ui_port: int) -> None:
        super().__init__(daemon=True)
        self.ui = f"http://127.0.0.1:{ui_port}/api/v1/applications"
        self.command_lines: set[str] = set()
        self.environment: str | None = None
        self.done = threading.Event()

    def _environment_page(self) -> str | None:
        try:
            with urllib.request.urlopen(self.ui, timeout=2) as r:
                apps = json.load(r)
            with urllib.request.urlopen(f"{self.ui}/{apps[0]['id']}/environment", timeout=2) as r:
                return r.read().decode()
        except (OSError, ValueError, IndexError, KeyError):
            return None   # not up yet, or already gone

    def run(self) -> None:
        while not self.done.wait(0.1):
            ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
            self.command_lines.update(line for line in ps.splitlines() if "spark" in line or "paimon" in line)
            if self.environment is None and any(APP in line for line in self.command_lines):
                self.environment = self._environment_page()


def test_the_s3_secret_key_shows_in_no_command_line_spark_ui_log_xcom_or_rendered_field(tmp_path, s3_server):
    secret = "S3cret" + secrets.token_hex(16)
    bucket = s3_server.new_bucket()
    warehouse = f"s3://{bucket}/wh"
    extra = {"warehouse": warehouse, "s3.endpoint": s3_server.endpoint, "s3.path.style.access": "true",
             "s3.region": "us-east-1"}
    options = {k: v for k, v in extra.items() if k != "warehouse"}
    catalog = Catalog(warehouse, dict(options, **{"s3.access-key": "AKIASECRETCHECK", "s3.secret-key": secret}))
    catalog.create_database("db")
    fields: list[pa.Field] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
    table = catalog.create_table("db.orders", pa.schema(fields), primary_keys=["id"], options={"bucket": "1"})
    for version in range(2):
        table.write(pa.table({"id": pa.array(range(20), pa.int64()), "name": [f"v{version}"] * 20}))

    home, dags, events = tmp_path / "airflow", tmp_path / "dags", tmp_path / "events"
    for folder in (home, dags, events):
        folder.mkdir()
    (dags / "secret_check.py").write_text(DAG_FILE)
    ui_port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_PAIMON_DEFAULT": json.dumps({"conn_type": "paimon", "login": "AKIASECRETCHECK",
                                                   "password": secret, "extra": extra}),
        "AIRFLOW_PAIMON_SPARK_LOG_LEVEL": "INFO",   # the most the application and Spark ever write to the log
        "SECRET_CHECK_UI_PORT": str(ui_port),
        "SECRET_CHECK_EVENT_LOG": f"file://{events}",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=600)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]

    watcher = _Watcher(ui_port)
    watcher.start()
    try:
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(dags)], env=env, capture_output=True, text=True,
                              timeout=900, cwd=str(tmp_path))
    finally:
        watcher.done.set()
        watcher.join()
    line = next((x for x in proc.stdout.splitlines() if x.startswith("SECRET_CHECK_RESULT ")), None)
    assert line, proc.stdout[-5000:] + proc.stderr[-8000:]
    result = json.loads(line[len("SECRET_CHECK_RESULT "):])
    assert result["state"] == "success" and result["tasks"] == {"compact": "success"}, result

    # ps: the samples saw the application's own command lines (spark-submit and the Python driver).
    submits = [c for c in watcher.command_lines if APP in c]
    assert any("SparkSubmit" in c or "spark-submit" in c for c in submits), watcher.command_lines
    assert all("--spec-file" in c for c in submits), submits
    assert [c for c in watcher.command_lines if secret in c] == []
    # The live Spark UI's environment page (Spark properties, system properties with the JVM's command line).
    assert watcher.environment is not None, "the Spark UI never answered while the application ran"
    page = json.loads(watcher.environment)
    assert page["sparkProperties"] and page["systemProperties"]
    assert secret not in watcher.environment
    # Spark's event log: the environment the history server shows, and every job's properties.
    event_text = "".join(p.read_text() for p in events.rglob("*") if p.is_file())   # rolling: a folder of files
    assert "SparkListenerEnvironmentUpdate" in event_text and secret not in event_text
    # The task log: the runner's own output and any log files Airflow wrote.
    task_log = proc.stdout + proc.stderr + "".join(p.read_text(errors="replace") for p in home.rglob("*.log"))
    assert "compact_app.py" in task_log and secret not in task_log
    # XCom: the compaction's result. Rendered template fields: the conf, application arguments, env vars.
    assert result["xcoms"] and '"status": "committed"' in "".join(result["xcoms"]).replace("'", '"')
    assert result["rendered"] and "spark.eventLog.dir" in result["rendered"][0]
    assert secret not in json.dumps(result)
    # And the job did reach the store with the secret: the table is compacted.
    latest = Catalog(warehouse, dict(options, **{"s3.access-key": "AKIASECRETCHECK", "s3.secret-key": secret})
                     ).get_table("db.orders").latest_snapshot()
    assert latest is not None and latest.commit_kind == "COMPACT"
