"""A Spark standalone cluster on 127.0.0.1, started from the installed pyspark: one master and two workers.

Each worker runs with a Python of its own: a virtual environment whose only site folder is this environment's
site-packages (pyarrow, fastavro, numpy, pyspark), listed in a ``.pth`` file. A ``.pth`` line adds the folder but
does not run the ``.pth`` files inside it, so the editable install of ``airflow_paimon`` is not importable there:
executors get the package only the way a real cluster gets it, from what the submission ships.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = Path(sys.executable).parent / "spark-class"
START_TIMEOUT = 120.0
WEBUI_BOUND = re.compile(r"MasterWebUI\b.*?started at (http://\S+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_python(folder: Path) -> Path:
    """A Python for a cluster node: the libraries of this environment, without the ``airflow_paimon`` package."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = folder / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "node-libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = folder / "bin" / "python3"
    probe = subprocess.run([str(python), "-c", "import pyarrow, fastavro, pyspark\n"
                            "import importlib.util as u; print(u.find_spec('airflow_paimon') is None)"],
                           capture_output=True, text=True, env=node_env(folder), cwd=str(folder))
    assert probe.stdout.strip() == "True", probe.stdout + probe.stderr
    return python


def node_env(python_home: Path) -> dict[str, str]:
    """The environment a node's processes start with: its own Python first on PATH, as PYSPARK_PYTHON too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHON"))}
    env.update(SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=str(python_home / "bin" / "python3"),
               PATH=f"{python_home / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               SPARK_LOCAL_IP="127.0.0.1")
    return env


@dataclass
class Worker:
    port: int
    webui_port: int
    python: Path
    process: subprocess.Popen


@dataclass
class StandaloneCluster:
    """A running master and its workers; `url` is what a ``spark`` connection's host and port name."""

    root: Path
    port: int
    webui_port: int
    master: subprocess.Popen | None = None
    workers: list[Worker] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def master_state(self) -> dict:
        with urllib.request.urlopen(f"{self._webui_url()}/json/", timeout=5) as r:
            return json.loads(r.read())

    def _webui_url(self) -> str:
        """Where the master's web UI really listens: a port taken between choosing and binding it makes Spark bind
        the next one, and the chosen port may then answer with another program's page."""
        log = self.root / "logs" / "master.log"
        found = WEBUI_BOUND.search(log.read_text(errors="replace")) if log.exists() else None
        return found.group(1).rstrip("/.") if found else f"http://127.0.0.1:{self.webui_port}"

    def start(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> StandaloneCluster:
        log = self.root / "logs"
        log.mkdir(parents=True)
        self.master = self._spawn(
            [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(self.webui_port)],
            dict(node_env(Path(sys.executable).parent.parent),
                 SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false"),   # its REST port is fixed (6066)
            log / "master.log")
        for n in range(workers):
            home = self.root / f"worker-{n}"
            python = node_python(home / "python")
            port, webui = free_port(), free_port()
            process = self._spawn(
                [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(webui), "--cores", str(cores), "--memory", memory,
                 "--work-dir", str(home / "work")],
                node_env(home / "python"), log / f"worker-{n}.log", cwd=home)
            self.workers.append(Worker(port, webui, python, process))
        self._wait_for_workers(workers)
        return self

    def _spawn(self, cmd: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
        with open(log, "wb") as out:
            return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(cwd or self.root),
                                    start_new_session=True)

    def _wait_for_workers(self, count: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            for p in [self.master, *(w.process for w in self.workers)]:
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"a Spark process exited ({p.returncode}): see {self.root / 'logs'}")
            try:
                alive = [w for w in self.master_state()["workers"] if w["state"] == "ALIVE"]
            except (OSError, ValueError):   # not up yet, or another program's page before the master logs its port
                alive = []
            if len(alive) >= count:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(alive)} of {count} Spark workers registered: see {self.root / 'logs'}")
            time.sleep(0.5)

    def stop(self) -> None:
        for p in [*(w.process for w in self.workers), self.master]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in [*(w.process for w in self.workers), self.master]:
            if p is not None:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
