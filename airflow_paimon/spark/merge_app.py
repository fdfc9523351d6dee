"""The merge Spark application: ``spark-submit .../airflow_paimon/spark/merge_app.py --spec '{...}'``.

Arguments: one JSON object (``--spec`` or ``--spec-file``) and/or flags of the same names::

    --target db.table --warehouse /data/wh --source /incoming/2026-11-20 --source-format parquet
    --on id --clauses '[{"when": "matched", "action": "update", "set": "*"}, ...]'
    --commit-user airflow:dag.task --commit-identifier 123456 [--reapply true]

Filesystem options come from ``--options '{...}'``, the spec file, or the environment variable
AIRFLOW_PAIMON_CATALOG_OPTIONS. The last line printed starts with ``AIRFLOW_PAIMON_RESULT`` and holds the result as
JSON; ``--result-file PATH`` writes it to a file too. Exit code 0 on success (including "already committed"), 65
for bad input (nothing committed; the error is on the last ``ERROR`` line of stderr and in the result), other
codes for crashes and Spark failures.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script by spark-submit: do not let this folder shadow top-level modules
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from typing import Any  # noqa: E402

from airflow_paimon.spark.common import json_arg, load_spec, run_app, spark_session  # noqa: E402

FLAGS: dict[str, dict[str, Any]] = {
    "target": {}, "warehouse": {}, "source": {"type": json_arg}, "source_format": {},
    "source_options": {"type": json_arg}, "on": {"type": json_arg}, "clauses": {"type": json_arg},
    "commit_user": {}, "commit_identifier": {}, "reapply": {}, "reapply_token": {},
    "options": {"type": json_arg}, "num_tasks": {}, "honour_sequence_field": {},
    "single_task_bytes": {}, "driver_bytes": {},
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from airflow_paimon.spark.merge import MergeSpec, run_merge

    spec = MergeSpec.from_dict(load_spec(argv, FLAGS))
    return run_merge(lambda: spark_session(f"paimon-merge-{spec.target}"), spec)


if __name__ == "__main__":
    sys.exit(run_app(main))
