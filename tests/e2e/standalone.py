"""``airflow standalone`` for the end-to-end tests: the server in its own process group, its REST API (logged in
as the UI does with the simple auth manager), a polling wait, and the environment the e2e DAGs read."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.tables import connection_json

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
TABLE = "demo.e2e"
LATE_TABLE = "demo.e2e_late"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Standalone:
    """``airflow standalone`` (or another ``airflow`` command, e.g. ``api-server``) in its own process group,
    stopped (with every child) on exit."""

    def __init__(self, home: Path, env: dict[str, str], command: tuple[str, ...] = ("standalone",)):
        self.home = home
        self.env = env
        self.command = command
        self.log_path = home / f"{command[0]}.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Standalone:
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [str(VENV_BIN / "airflow"), *self.command],
            env=self.env,
            cwd=self.home,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the components and task processes stop with it
        )
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        proc = self.process
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the group id is the pid of the process started here
        # SIGTERM, not SIGINT: measured here, every process of a group sent SIGTERM had exited within 5 s, while
        # after a SIGINT the group was still alive 60 s later.
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + wait
            proc.poll()  # reap the leader once it exited: a zombie still counts as alive for killpg(pgid, 0)
            while time.monotonic() < deadline and _group_alive(pgid):
                time.sleep(0.5)
                proc.poll()
            if not _group_alive(pgid):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self._log.close()
        self.process = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Api:
    """The REST API, authenticated as the UI's login form does (simple auth manager)."""

    def __init__(self, base: str, home: Path):
        self.base = base
        self.home = home
        self.client = httpx.Client(base_url=base, timeout=30)
        self.token: str | None = None

    def login(self) -> None:
        passwords = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
        response = self.client.post("/auth/token", json={"username": "admin", "password": passwords["admin"]})
        assert response.status_code == 201, response.text
        self.token = response.json()["access_token"]
        self.client.headers["Authorization"] = f"Bearer {self.token}"

    def get(self, path: str, **params) -> httpx.Response:
        return self.client.get(path, params=params or None)

    def post(self, path: str, body: dict) -> httpx.Response:
        return self.client.post(path, json=body)

    def unpause(self, dag_id: str) -> None:
        response = self.client.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False})
        assert response.status_code == 200, response.text

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        response = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        return response.json()["state"] if response.status_code == 200 else None


SCHEDULER_GRACE = 60  # seconds a scheduler may go without a heartbeat before another one is started


class SchedulerRevival:
    """Another ``airflow scheduler`` in the same home once standalone's has not heartbeated for `SCHEDULER_GRACE`
    seconds, as a process supervisor would restart it in production.

    On SQLite, a backfill the API refuses for a locked database is rolled back after the scheduler may already have
    loaded one of its runs; that scheduler then dies (``ObjectDeletedError``: "DagRun has been deleted"), and
    ``airflow standalone`` restarts none of its components, so no run would ever start again."""

    def __init__(self, home: Path, env: dict[str, str], api: Api):
        self.home = home
        self.env = env
        self.api = api
        self.started: Standalone | None = None
        self._silent_since: float | None = None

    def check(self) -> None:
        health = self.api.get("/api/v2/monitor/health").json()
        if (health.get("scheduler") or {}).get("status") == "healthy":
            self._silent_since = None
            return
        now = time.monotonic()
        if self._silent_since is None:
            self._silent_since = now
        elif now - self._silent_since > SCHEDULER_GRACE and self.started is None:
            print(f"no scheduler heartbeat for {SCHEDULER_GRACE} s: starting another scheduler", flush=True)
            self.started = Standalone(self.home, self.env, ("scheduler",)).__enter__()

    def stop(self) -> None:
        if self.started is not None:
            self.started.stop()


def wait_for(what: str, condition, timeout: float, server: Standalone, interval: float = 2.0,
             scheduler: SchedulerRevival | None = None):
    """Poll `condition` until it holds; `scheduler`: revive the scheduler if it dies meanwhile."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        if not server.alive():
            pytest.fail(f"airflow {server.command[0]} exited while waiting for {what}:\n{server.tail()}")
        try:
            if scheduler is not None:
                scheduler.check()
            value = condition()
            if value:
                return value
        except (httpx.HTTPError, OSError, ValueError, KeyError) as exc:
            last_error = exc
        time.sleep(interval)
    pytest.fail(f"timed out waiting for {what} (last error: {last_error!r}):\n{server.tail()}")


def dag_folder(home: Path) -> Path:
    """The repository's dags/ and the e2e DAGs, in one folder."""
    folder = home / "dags"
    folder.mkdir()
    for source in [*sorted((REPO / "dags").glob("*.py")), *sorted((REPO / "tests/e2e/dag_files").glob("*.py"))]:
        shutil.copy(source, folder / source.name)
    return folder


def server_env(home: Path, port: int, dags: Path) -> dict[str, str]:
    """The environment of an Airflow home on SQLite whose API server listens on 127.0.0.1:`port`, reading DAGs
    from `dags`; none of the caller's AIRFLOW* or PAIMON_* variables leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PAIMON_"))}
    env.update({
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        # A database error's statement and cause in the response, so a failing test says what failed.
        "AIRFLOW__API__EXPOSE_STACKTRACE": "True",
    })
    return env


def airflow_env(home: Path, port: int, warehouse: str, offset: str, **extra: str) -> dict[str, str]:
    env = server_env(home, port, dag_folder(home))
    env.update({
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "8",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",
        "AIRFLOW_CONN_PAIMON_DEFAULT": connection_json(warehouse),
        # The DAG's configuration (read at parse time from the environment).
        "PAIMON_DAILY_TAGS_TABLE": TABLE,
        "PAIMON_DAILY_TAGS_CREATE_TIME": "00:00",
        "PAIMON_DAILY_TAGS_TIMEZONE": offset,
        "PAIMON_E2E_LATE_TABLE": LATE_TABLE,
        **extra,
    })
    return env
