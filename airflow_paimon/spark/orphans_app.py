"""Orphan-file cleanup on Spark, for tables too big to list and delete from one process.

``spark-submit .../airflow_paimon/spark/orphans_app.py --spec '{"target": ..., "warehouse": ...}'``

The rules are the format library's (``airflow_paimon.format.cleanup``): what is referenced is every file a
snapshot, tag or changelog of the table names (``referenced_names``), which paths orphan cleanup may judge at all
is ``_orphan_candidate`` (never schema/, snapshot and tag files, hints, consumers, branches), and only files
older than the safety age (default one day) go. Spark only spreads the work:

1. the driver reads what is referenced (R1) and splits the table directory into listing units;
2. tasks list their units and keep the files that are candidates, unreferenced in R1 and old enough;
3. the driver reads what is referenced again (R2) just before deleting and drops anything referenced meanwhile;
4. tasks delete the remaining orphans; the driver removes bucket directories left empty.

Arguments: target, warehouse, options, older_than (a point in time: ISO text or epoch millis), older_than_age
(a duration such as "3 d"; default 1 day), dry_run, num_tasks.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script by spark-submit: do not let this folder shadow top-level modules
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import time  # noqa: E402
from typing import Any, Iterator, Mapping  # noqa: E402

from airflow_paimon.spark.common import json_arg, load_spec, run_app, spark_session  # noqa: E402

FLAGS = {
    "target": {}, "warehouse": {}, "options": {"type": json_arg}, "older_than": {"type": json_arg},
    "older_than_age": {}, "dry_run": {}, "num_tasks": {"type": int},
}


def _listing_units(io: Any, root: str, partition_depth: int, wanted: int) -> list[tuple[str, bool]]:
    """(directory, recursive) units covering every file under `root`, split along partition directories until
    there are about `wanted` of them."""
    units: list[tuple[str, bool]] = [(root, False)]
    frontier = [(f"{root}/{d}", 0) for d in io.list_subdirs(root)]
    done: list[tuple[str, bool]] = []
    while frontier:
        path, depth = frontier.pop(0)
        name = path.rsplit("/", 1)[-1]
        expandable = "=" in name and depth < partition_depth
        if expandable and len(units) + len(done) + len(frontier) < wanted:
            units.append((path, False))
            frontier.extend((f"{path}/{d}", depth + 1) for d in io.list_subdirs(path))
        else:
            done.append((path, True))
    return units + done


def run_remove_orphans(spark: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    import datetime as dt

    import pyarrow as pa
    from pyspark.sql import types as T

    from airflow_paimon.format import Catalog, cleanup
    from airflow_paimon.format.options import parse_duration
    from airflow_paimon.spark.merge_job import _as_bool

    started = time.monotonic()
    unknown = set(spec) - set(FLAGS)
    if unknown:
        raise ValueError(f"unknown arguments {sorted(unknown)}; known: {sorted(FLAGS)}")
    if not spec.get("target") or not spec.get("warehouse"):
        raise ValueError("orphan cleanup needs target and warehouse")
    table = Catalog(spec["warehouse"], spec.get("options") or {}).get_table(spec["target"])
    dry_run = _as_bool(spec.get("dry_run") or False)
    now_ms = int(time.time() * 1000)
    if spec.get("older_than") is not None:
        threshold = cleanup._millis(spec["older_than"], "older_than")
    else:
        age = parse_duration(spec["older_than_age"], "older_than_age") if spec.get("older_than_age") \
            else cleanup.DEFAULT_ORPHAN_AGE
        if age < dt.timedelta(0):
            raise ValueError("older_than_age must not be negative")
        threshold = now_ms - int(age.total_seconds() * 1000)
    cleanup._check_supported(table)
    io, root, depth = table.io, table.path, len(table.partition_keys)
    k = int(spec.get("num_tasks") or max(1, spark.sparkContext.defaultParallelism * 2))
    units = _listing_units(io, root, depth, 4 * k)
    referenced = spark.sparkContext.broadcast(frozenset(cleanup.referenced_names(table)))
    candidate = cleanup._orphan_candidate
    schema = T.StructType([T.StructField("path", T.StringType()), T.StructField("size", T.LongType()),
                           T.StructField("mtime_ms", T.LongType()), T.StructField("scanned", T.LongType())])

    def list_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        names = referenced.value
        for batch in batches:
            paths, sizes, mtimes, scanned = [], [], [], 0
            for i in batch.column(0).to_pylist():
                directory, recursive = units[i]
                infos = io.walk(directory) if recursive else io.list_dir(directory)
                for info in infos:
                    scanned += 1
                    if not info.path.startswith(root + "/"):
                        continue
                    rel = info.path[len(root) + 1:]
                    if not candidate(rel, depth):
                        continue
                    if rel.rsplit("/", 1)[-1] in names or info.mtime_ms >= threshold:
                        continue
                    paths.append(info.path)
                    sizes.append(info.size)
                    mtimes.append(info.mtime_ms)
            # The found files, then one row (path null) carrying how many files this batch listed.
            paths.append(None)
            sizes.append(0)
            mtimes.append(0)
            counts = [0] * (len(paths) - 1) + [scanned]
            yield pa.record_batch([pa.array(paths, pa.string()), pa.array(sizes, pa.int64()),
                                   pa.array(mtimes, pa.int64()), pa.array(counts, pa.int64())],
                                  names=["path", "size", "mtime_ms", "scanned"])

    n = len(units)
    rows = spark.range(0, n, 1, min(n, k * 4)).mapInArrow(list_task, schema).collect()
    scanned = sum(r["scanned"] for r in rows)
    orphans = sorted((r["path"], r["size"], r["mtime_ms"]) for r in rows if r["path"] is not None)
    result: dict[str, Any] = {"target": table.identifier, "dry_run": dry_run,
                              "older_than": dt.datetime.fromtimestamp(threshold / 1000, dt.timezone.utc).isoformat(),
                              "listing_units": n, "scanned": scanned}
    if not dry_run and orphans:
        again = cleanup.referenced_names(table)
        orphans = [o for o in orphans if o[0].rsplit("/", 1)[-1] not in again]
    paths = [o[0] for o in orphans]
    result.update(files_found=len(orphans), bytes=sum(o[1] for o in orphans), files=paths[:1000])
    if dry_run or not paths:
        result.update(status="dry_run" if dry_run else "nothing_to_delete", files_deleted=0,
                      seconds=round(time.monotonic() - started, 3))
        return result
    chunks = max(1, min(len(paths), k * 2))

    def delete_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            done = 0
            for i in batch.column(0).to_pylist():
                for p in paths[i::chunks]:
                    io.delete(p)
                    done += 1
            yield pa.record_batch([pa.array([done], pa.int64())], names=["deleted"])

    deleted = spark.range(0, chunks, 1, chunks).mapInArrow(
        delete_task, T.StructType([T.StructField("deleted", T.LongType())])).collect()
    for d in sorted({p.rsplit("/", 1)[0] for p in paths if "/bucket-" in p}, reverse=True):
        io.delete_dir_if_empty(d)
    result.update(status="deleted", files_deleted=sum(r["deleted"] for r in deleted),
                  seconds=round(time.monotonic() - started, 3))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    spec = load_spec(argv, FLAGS)
    spark = spark_session(f"paimon-remove-orphans-{spec.get('target')}")
    return run_remove_orphans(spark, spec)


if __name__ == "__main__":
    sys.exit(run_app(main))
