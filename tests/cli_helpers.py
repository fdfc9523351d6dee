"""Driving the CLI in-process: main(argv) with its exit code and both streams, as a shell would see them."""

from __future__ import annotations

import pytest

from airflow_paimon.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
