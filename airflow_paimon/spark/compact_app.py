"""The compaction Spark application: ``spark-submit .../airflow_paimon/spark/compact_app.py --spec '{...}'``.

The driver plans which buckets need compaction (all, or those of the given partitions), the tasks compact them
with ``airflow_paimon.format.compact`` (full compaction of primary-key buckets into the top level; small-file
merging for append tables), one bucket per task at a time, and the driver makes ONE commit of kind COMPACT.
Old files stay on disk for older snapshots and tags. On a ``lookup`` or ``full-compaction`` table each task also
writes the changelog of its bucket, exactly as the library's compaction (``table.maintenance.compact``), and the
commit lists it; ``full-compaction.delta-commits`` does not apply, since a compaction asked for always runs.

Arguments (``--spec`` JSON or flags): target, warehouse, options, partitions (list of {column: value}),
commit_user, commit_identifier, num_tasks, target_file_size (bytes).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script by spark-submit: do not let this folder shadow top-level modules
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import json  # noqa: E402
from typing import Any, Iterator, Mapping  # noqa: E402

from airflow_paimon.spark.common import json_arg, load_spec, run_app, spark_session  # noqa: E402

FLAGS: dict[str, dict[str, Any]] = {
    "target": {}, "warehouse": {}, "options": {"type": json_arg}, "partitions": {"type": json_arg},
    "commit_user": {}, "commit_identifier": {}, "num_tasks": {}, "target_file_size": {},
}


def run_compaction(spark: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    import pyarrow as pa
    from pyspark.sql import types as T

    from airflow_paimon.format import Catalog, CommitMessage
    from airflow_paimon.format.compact import compact_split
    from airflow_paimon.format.compaction_run import begin_compaction
    from airflow_paimon.format.values import count
    from airflow_paimon.spark.tasks import run_per_group

    unknown = set(spec) - set(FLAGS)
    if unknown:
        raise ValueError(f"unknown compaction arguments {sorted(unknown)}; known: {sorted(FLAGS)}")
    if not spec.get("target") or not spec.get("warehouse"):
        raise ValueError("the compaction needs target and warehouse")
    table = Catalog(spec["warehouse"], spec.get("options") or {}).get_table(spec["target"])
    ident = None if spec.get("commit_identifier") is None else count(spec["commit_identifier"], "commit_identifier",
                                                                      minimum=None)
    partitions = spec.get("partitions")
    run = begin_compaction(table, commit_user=spec.get("commit_user"), commit_identifier=ident,
                           partitions=[partitions] if isinstance(partitions, Mapping) else partitions)
    if run.done:
        if "message" in run.result:
            print(run.result["message"], flush=True)
        return run.result
    splits = run.splits
    target_size = None if spec.get("target_file_size") is None else count(spec["target_file_size"],
                                                                          "target_file_size")
    out_schema = T.StructType([T.StructField("message", T.StringType(), True)])

    def compact(i: int) -> Iterator[pa.Table]:
        msg = compact_split(table, splits[i], target_size)
        if msg is not None:
            yield pa.table({"message": pa.array([json.dumps(msg.to_dict())], pa.string())})

    num_tasks = None if spec.get("num_tasks") is None else count(spec["num_tasks"], "num_tasks")
    rows = run_per_group(spark, [s.row_count for s in splits], compact, out_schema, num_tasks).collect()
    return run.finish([CommitMessage.from_dict(json.loads(r["message"])) for r in rows])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    spec = load_spec(argv, FLAGS)
    spark = spark_session(f"paimon-compact-{spec.get('target')}")
    return run_compaction(spark, spec)


if __name__ == "__main__":
    sys.exit(run_app(main))
