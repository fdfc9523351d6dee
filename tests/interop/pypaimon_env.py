"""Runs code under the two other Python implementations of Paimon, each in a virtual environment of its own.

* pypaimon, Apache Paimon's own Python package: it pins pyarrow < 20 and cannot share an environment with
  Airflow 3.3.
* pypaimon-rust, the bindings of paimon-rust (a Rust implementation with DataFusion SQL): it checks what pypaimon
  cannot, such as an incremental scan in `delta` or `changelog` mode between two given snapshots, with row kinds,
  and tables written by `CREATE TABLE` and `INSERT` in SQL.

The tests drive them through a subprocess: a script reads JSON arguments from stdin and prints a JSON answer (or
writes Parquet files that the test reads back). Each environment is created on first use at the repository root
(`.venv-interop`, `.venv-interop-rust`; PYPAIMON_VENV and PAIMON_RUST_VENV name others) and reused afterwards;
a lock file keeps two test workers from creating one at the same time.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PYPAIMON_VERSION = "2.1.0"
PAIMON_RUST_VERSION = "0.4.0"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Environment:
    """A virtual environment holding `requirements` (the first names the stamp that marks it complete)."""

    venv: Path
    requirements: tuple[str, ...]

    @property
    def python(self) -> Path:
        """The environment's interpreter, created and populated if missing."""
        stamp = self.venv / f".{self.requirements[0].replace('==', '-')}"
        interpreter = self.venv / "bin" / "python"
        if stamp.exists():
            return interpreter
        self.venv.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.venv}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not stamp.exists():
                subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
                uv = Path(sys.executable).parent / "uv"
                if uv.exists():
                    cmd = [str(uv), "pip", "install", "--python", str(interpreter), "--quiet"]
                else:
                    cmd = [str(interpreter), "-m", "pip", "install", "--quiet"]
                subprocess.run(cmd + list(self.requirements), check=True)
                stamp.touch()
        return interpreter

    def run(self, script: str, args: Any = None, timeout: float = 600) -> Any:
        """Run `script` with `args` (JSON) bound to the name ARGS; return what it prints as JSON.

        The script must print exactly one JSON document on its last stdout line."""
        prelude = "import json, sys\nARGS = json.loads(sys.stdin.read())\n"
        proc = subprocess.run(
            [str(self.python), "-c", prelude + textwrap.dedent(script)],
            input=json.dumps(args),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            name = self.requirements[0].split("==")[0]
            raise AssertionError(f"{name} script failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        return json.loads(lines[-1])


PYPAIMON = Environment(Path(os.environ.get("PYPAIMON_VENV", REPO_ROOT / ".venv-interop")),
                       (f"pypaimon=={PYPAIMON_VERSION}",))
PAIMON_RUST = Environment(Path(os.environ.get("PAIMON_RUST_VENV", REPO_ROOT / ".venv-interop-rust")),
                          (f"pypaimon-rust=={PAIMON_RUST_VERSION}", "pyarrow>=18"))


def run_pypaimon(script: str, args: Any = None, timeout: float = 600) -> Any:
    """`script` under pypaimon (see Environment.run)."""
    return PYPAIMON.run(script, args, timeout)


def run_paimon_rust(script: str, args: Any = None, timeout: float = 600) -> Any:
    """`script` under pypaimon-rust (see Environment.run)."""
    return PAIMON_RUST.run(script, args, timeout)
