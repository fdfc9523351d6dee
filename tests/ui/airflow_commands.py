"""Run ``airflow`` CLI commands one after the other in one process, so Airflow is imported once.

``python -m tests.ui.airflow_commands MARKER 'db migrate' 'dags test my_dag 2026-11-20'`` parses each argument as
the ``airflow`` command line would and runs it; after the first command it creates the file MARKER, so a caller
can start the API server on the migrated database while the next commands run.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def main(marker: str, commands: list[str]) -> None:
    from airflow.cli import cli_parser

    parser = cli_parser.get_parser()
    for n, command in enumerate(commands):
        args = parser.parse_args(shlex.split(command))
        args.func(args)
        if n == 0:
            Path(marker).touch()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
