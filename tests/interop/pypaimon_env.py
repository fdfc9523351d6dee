"""Runs code under pypaimon, Apache Paimon's own Python package, in a virtual environment of its own.

pypaimon pins pyarrow < 20 and cannot share an environment with Airflow 3.3, so the interop tests drive it
through a subprocess: a script reads JSON arguments from stdin and prints a JSON answer (or writes Parquet
files that the test reads back). The environment is created on first use in `.venv-interop` at the
repository root and reused afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

PYPAIMON_VERSION = "2.1.0"
REPO_ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("PYPAIMON_VENV", REPO_ROOT / ".venv-interop"))
_PYTHON = VENV / "bin" / "python"


def interop_python() -> Path:
    """The interop environment's interpreter, created and populated if missing."""
    stamp = VENV / f".pypaimon-{PYPAIMON_VERSION}"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        uv = Path(sys.executable).parent / "uv"
        if uv.exists():
            cmd = [str(uv), "pip", "install", "--python", str(_PYTHON), "--quiet"]
        else:
            cmd = [str(_PYTHON), "-m", "pip", "install", "--quiet"]
        subprocess.run(cmd + [f"pypaimon=={PYPAIMON_VERSION}"], check=True)
        stamp.touch()
    return _PYTHON


def run_pypaimon(script: str, args: Any = None, timeout: float = 600) -> Any:
    """Run `script` under pypaimon with `args` (JSON) bound to the name ARGS; return what it prints as JSON.

    The script must print exactly one JSON document on its last stdout line.
    """
    prelude = "import json, sys\nARGS = json.loads(sys.stdin.read())\n"
    proc = subprocess.run(
        [str(interop_python()), "-c", prelude + textwrap.dedent(script)],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(f"pypaimon script failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return json.loads(lines[-1])
