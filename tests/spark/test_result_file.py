"""The result file of the Spark applications (``run_app``): written where the operator looks -- beside the spec,
or under the warehouse (a folder that may not exist yet, a ``file://`` URI) -- for a result and for a refused
input alike. No Spark needed: ``run_app`` wraps any application's main."""

from __future__ import annotations

import os
import stat

from airflow_paimon.spark.common import INPUT_ERROR_EXIT, read_result_file, remove_result_file, run_app


def test_the_result_goes_to_a_new_warehouse_folder_with_mode_0600(tmp_path):
    path = tmp_path / "wh" / ".airflow-paimon" / "results" / "dag.task.1.json"
    assert run_app(lambda rest: {"status": "committed", "rest": rest}, ["--result-file", str(path), "--x", "1"]) == 0
    assert read_result_file(str(path)) == {"status": "committed", "rest": ["--x", "1"]}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    remove_result_file(str(path))
    assert not path.exists() and read_result_file(str(path)) is None
    remove_result_file(str(path))  # absent is fine


def test_a_refused_input_is_a_failed_result_at_a_file_uri(tmp_path, capsys):
    uri = f"file://{tmp_path}/wh/.airflow-paimon/results/r.json"

    def refuse(rest):
        raise ValueError("source: no such folder /in/2026-11-14")

    assert run_app(refuse, ["--result-file", uri]) == INPUT_ERROR_EXIT
    assert read_result_file(uri) == {"status": "failed", "error": "ValueError: source: no such folder /in/2026-11-14"}
    assert capsys.readouterr().err.startswith("ERROR ValueError: source: no such folder")
    remove_result_file(uri)
    assert read_result_file(uri) is None
