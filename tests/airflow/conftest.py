"""Shared fixtures of the Airflow tests.

Airflow reads its configuration when it is first imported, so a private AIRFLOW_HOME (with example DAGs
and plugins switched off and a SQLite metadata database inside it) is set up here, at import time, before
any test module of this folder imports Airflow. The ``airflow_db`` fixture migrates that database once per
session for the tests that need the metadata database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="airflow-paimon-home-"))
_ENV = {
    "AIRFLOW_HOME": str(_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(_HOME / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(_HOME / "plugins"),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
}
(_HOME / "dags").mkdir()
(_HOME / "plugins").mkdir()
if "airflow" not in sys.modules:
    os.environ.update(_ENV)

VENV_BIN = Path(sys.executable).parent


def airflow_env(**extra: str) -> dict[str, str]:
    """The environment for an ``airflow`` subprocess: this session's AIRFLOW_HOME plus ``extra``."""
    env = dict(os.environ)
    env.update(_ENV)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run_airflow(*args: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the ``airflow`` CLI of this virtual environment; fails the test on a non-zero exit."""
    airflow = shutil.which("airflow", path=str(VENV_BIN)) or "airflow"
    result = subprocess.run([airflow, *args], env=env or airflow_env(), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        pytest.fail(f"airflow {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The private AIRFLOW_HOME of this test session."""
    return _HOME


@pytest.fixture(scope="session")
def airflow_db(airflow_home: Path) -> Path:
    """AIRFLOW_HOME with a migrated SQLite metadata database (``airflow db migrate``, once a session)."""
    run_airflow("db", "migrate", timeout=600)
    return airflow_home


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture
def now(monkeypatch):
    """Freeze the tag operators' and sensors' clock: ``now(t)`` sets it (default: long after every period used)."""
    import pendulum

    from airflow_paimon import clock

    def set_now(value: pendulum.DateTime) -> None:
        monkeypatch.setattr(clock, "utcnow", lambda: value)

    set_now(pendulum.datetime(2026, 11, 20, tz="UTC"))
    return set_now


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """An empty warehouse that ``paimon_default`` points to."""
    from tests.e2e.tables import connection_json

    path = str(tmp_path / "wh")
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", connection_json(path))
    return path
