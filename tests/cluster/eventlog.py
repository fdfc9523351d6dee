"""What Spark's event logs say about where an application's tasks ran."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


@dataclass
class AppTasks:
    """One application: its name, and its tasks per worker (by the worker's web UI port, which is in the log
    URLs of the executors it ran)."""

    name: str = ""
    succeeded: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)


def _events(log: Path) -> list[str]:
    """The lines of one application's event log: a file, or a folder of rolled ``events_<n>_<app>`` files."""
    if log.is_file():
        return log.read_text().splitlines()
    parts = sorted(log.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    return [line for part in parts for line in part.read_text().splitlines()]


def read_event_logs(folder: Path) -> list[AppTasks]:
    """Every application logged in `folder` (uncompressed event logs, ``spark.eventLog.compress=false``)."""
    apps = []
    for path in sorted(folder.iterdir()):
        app = AppTasks()
        worker_of: dict[str, int | None] = {}
        for line in _events(path):
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerApplicationStart":
                app.name = event["App Name"]
            elif kind == "SparkListenerExecutorAdded":
                stdout = event["Executor Info"].get("Log Urls", {}).get("stdout", "")
                worker_of[event["Executor ID"]] = urlsplit(stdout).port
            elif kind == "SparkListenerTaskEnd":
                info = event["Task Info"]
                worker = worker_of.get(info["Executor ID"])
                (app.failed if info["Failed"] or info.get("Killed") else app.succeeded)[worker] += 1
        apps.append(app)
    return apps
