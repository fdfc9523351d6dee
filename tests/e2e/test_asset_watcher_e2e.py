"""End to end: an asset watcher on a Paimon table (``ChangesTrigger``) run by a real ``airflow triggerer`` process
fires once per new snapshot, and a restart of the triggerer in between neither loses nor repeats an event.

What runs: ``airflow db migrate`` on SQLite, the DAG file parsed and stored as the DAG processor stores it (which
registers the watcher's trigger), and ``airflow triggerer`` in its own process group. Commits are made here; the
asset events and the watcher's cursor are read from the metadata database.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.e2e.tables import connection_json, create_table, rows

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

VENV_BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import DAG, Asset, AssetWatcher, task

    from airflow_paimon.triggers import ChangesTrigger

    orders = Asset("paimon_orders_changes", watchers=[AssetWatcher(
        name="orders_commits",
        trigger=ChangesTrigger(paimon_conn_id="paimon_default", table="demo.orders", after_snapshot=0,
                               poll_interval=1))])

    with DAG("orders_changed", schedule=[orders], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             catchup=False, is_paused_upon_creation=False):
        @task
        def noop():
            pass

        noop()
    """
)

SYNC = textwrap.dedent(
    """
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    bag = DagBag(dag_folder={folder!r})
    assert not bag.import_errors, bag.import_errors
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)
    """
)


def run(args: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"


class Triggerer:
    """``airflow triggerer`` in its own process group; ``stop`` ends it gracefully (SIGTERM), as a restart does."""

    def __init__(self, env: dict[str, str], log: Path):
        self.env, self.log_path = env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([str(VENV_BIN / "airflow"), "triggerer"], env=self.env, cwd=ROOT,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.process is None:
            return
        for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.process = None

    def tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-60:])


def wait_for(what: str, condition, triggerer: Triggerer, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if triggerer.process is not None and triggerer.process.poll() is not None:
            pytest.fail(f"the triggerer exited while waiting for {what}:\n{triggerer.tail()}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}:\n{triggerer.tail()}")


def test_watcher_fires_once_per_snapshot_across_a_triggerer_restart(tmp_path):
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "watch.py").write_text(DAG_FILE)
    warehouse = str(tmp_path / "wh")
    database = home / "airflow.db"
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{database}",
        "AIRFLOW_CONN_PAIMON_DEFAULT": connection_json(warehouse),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    })
    table = create_table(warehouse, "demo.orders", {"bucket": "1"})
    run([str(VENV_BIN / "airflow"), "db", "migrate"], env)
    run([sys.executable, "-c", SYNC.format(folder=str(home / "dags"))], env)

    def payloads() -> list[dict]:
        with contextlib.closing(sqlite3.connect(database)) as db:
            found = db.execute("SELECT extra FROM asset_event ORDER BY id").fetchall()
        return [json.loads(extra)["payload"] for (extra,) in found]

    def cursor() -> int | None:
        with contextlib.closing(sqlite3.connect(database)) as db:
            found = db.execute("SELECT value FROM asset_state_store WHERE key = ?",
                               ("paimon_changes_after_snapshot",)).fetchall()
        return json.loads(found[0][0]) if found else None

    def ranges() -> list[tuple[int, int, list[int]]]:
        return [(p["start_snapshot"], p["end_snapshot"], p["snapshots"]) for p in payloads()]

    triggerer = Triggerer(env, tmp_path / "triggerer.log")
    try:
        triggerer.start()
        table.write(rows(1))
        wait_for("the first event", lambda: len(payloads()) >= 1, triggerer)
        wait_for("the cursor past snapshot 1", lambda: cursor() == 1, triggerer)
        assert ranges() == [(0, 1, [1])]

        triggerer.stop()
        table.write(rows(2))  # committed while no triggerer runs
        table.write(rows(3))
        triggerer.start()
        wait_for("the event of the commits made during the restart", lambda: len(payloads()) >= 2, triggerer)
        table.write(rows(4))
        wait_for("the event after the restart", lambda: len(payloads()) >= 3, triggerer)
        assert ranges() == [(0, 1, [1]), (1, 3, [2, 3]), (3, 4, [4])]
    finally:
        triggerer.stop()
