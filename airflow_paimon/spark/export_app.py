"""The change-export Spark application: ``spark-submit .../airflow_paimon/spark/export_app.py --spec '{...}'``.

Writes one range of a table's change feed as an export folder (``airflow_paimon.format.changes.export``), with the
same guarantees as the worker's export: the driver plans the feed (``airflow_paimon.spark.changes``: every check
before any job), empties the folder of an earlier attempt (its marker first), the tasks read consecutive stretches
of the feed's units and write them as ``part-<task>-<n>.parquet`` with the library's file IO (a local path or an
object-store URI), and the driver, once every task succeeded, deletes what a failed task attempt left and writes
the manifest ``_SUCCESS`` last. File names sort in the feed's order.

Arguments (``--spec`` JSON or flags): target, warehouse, options (the filesystem options, for the table and the
folder), path, start, end, mode, columns, consumer_id, max_rows_per_file, num_tasks. The result is the manifest.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script by spark-submit: do not let this folder shadow top-level modules
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from typing import Any, Iterator, Mapping  # noqa: E402

from airflow_paimon.spark.common import json_arg, load_spec, run_app, spark_session  # noqa: E402

FLAGS: dict[str, dict[str, Any]] = {
    "target": {}, "warehouse": {}, "options": {"type": json_arg}, "path": {}, "start": {"type": json_arg},
    "end": {"type": json_arg}, "mode": {}, "columns": {"type": json_arg}, "consumer_id": {},
    "max_rows_per_file": {}, "num_tasks": {},
}


def run_export(spark: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    import json
    from collections import Counter

    import pyarrow as pa
    from pyspark.sql import types as T

    from airflow_paimon.format import Catalog
    from airflow_paimon.format.changes.export import PartWriter, clear_folder, finish_folder, manifest
    from airflow_paimon.format.fileio import FileIO
    from airflow_paimon.format.values import count
    from airflow_paimon.spark.changes import feed_units
    from airflow_paimon.spark.tasks import contiguous_groups, default_tasks, run_groups

    unknown = set(spec) - set(FLAGS)
    if unknown:
        raise ValueError(f"unknown export arguments {sorted(unknown)}; known: {sorted(FLAGS)}")
    if not spec.get("target") or not spec.get("warehouse") or not spec.get("path"):
        raise ValueError("the export needs target, warehouse and path")
    options = spec.get("options") or {}
    table = Catalog(spec["warehouse"], options).get_table(spec["target"])
    folder = str(spec["path"]).rstrip("/")
    consumer = spec.get("consumer_id") or None
    max_rows = count(spec.get("max_rows_per_file", 1_000_000), "max_rows_per_file")
    units = feed_units(table, None if consumer else spec.get("start"), spec.get("end"),
                       mode=str(spec.get("mode") or "auto"), columns=spec.get("columns"), consumer_id=consumer)
    schema = units.plan.schema
    io = FileIO(folder, options)
    clear_folder(io, folder)
    num_tasks = count(spec["num_tasks"], "num_tasks") if spec.get("num_tasks") is not None else default_tasks(spark)
    groups = contiguous_groups(units.sizes, num_tasks)
    read = units.read
    out_schema = T.StructType([T.StructField("file", T.StringType(), False),
                               T.StructField("rows", T.LongType(), False),
                               T.StructField("counts", T.StringType(), False)])

    def write(group: int, indices: list[int]) -> Iterator[pa.Table]:
        writer = PartWriter(FileIO(folder, options), folder, schema, max_rows, group)
        try:
            writer.write(batch for i in indices for t in read(i) for batch in t.to_batches())
        finally:
            writer.close(at_least_one=False)
        yield pa.table({"file": [name for name, _ in writer.files], "rows": [rows for _, rows in writer.files],
                        "counts": [json.dumps(c) for c in writer.file_counts]})

    written = sorted(run_groups(spark, groups, write, out_schema).collect(), key=lambda r: r["file"])
    counts: Counter[str] = Counter()
    for row in written:
        counts.update(json.loads(row["counts"]))
    files = [(r["file"], int(r["rows"])) for r in written]
    if not files:  # nothing changed: one empty file, for the schema
        empty = PartWriter(io, folder, schema, max_rows)
        empty.close()
        files = empty.files
    result = manifest(table=table.identifier, folder=folder, start=spec.get("start"), end=spec.get("end"),
                      mode=str(spec.get("mode") or "auto"), files=files, counts=counts, consumer=consumer,
                      engine="spark")
    finish_folder(io, folder, result)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    spec = load_spec(argv, FLAGS)
    spark = spark_session(f"paimon-export-{spec.get('target')}")
    return run_export(spark, spec)


if __name__ == "__main__":
    sys.exit(run_app(main))
