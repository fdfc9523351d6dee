"""Orphan-file cleanup on Spark, for tables too big to list and delete from one process.

``spark-submit .../airflow_paimon/spark/orphans_app.py --spec '{"target": ..., "warehouse": ...}'``

The rules are the format library's, through its public names (``airflow_paimon.format.upkeep.orphans``): the
safety threshold is ``orphan_threshold`` (default one day), what is referenced is every file a snapshot, tag or
changelog of the table names (``referenced_names``), a listed file is an orphan by ``orphan_file`` (a path
orphan cleanup may judge at all, never schema/, snapshot and tag files, hints, consumers, branches; unreferenced;
older than the threshold), and the result is the library's ``OrphanResult``, so the worker and Spark report
the same shape. Spark only spreads the work:

1. the driver reads what is referenced (R1) and splits the table directory into listing units;
2. tasks list their units and keep the files that are candidates, unreferenced in R1 and old enough;
3. the driver reads what is referenced again (R2) just before deleting and drops anything referenced meanwhile
   (``still_unreferenced``);
4. tasks delete the remaining orphans; the driver removes the bucket and partition directories left empty
   (``remove_empty_data_dirs``).

Arguments (read by ``airflow_paimon.format.values``): target, warehouse, options, older_than (a point in time:
ISO text or epoch millis), older_than_age (a duration such as "3 d"; default 1 day), dry_run, num_tasks.
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

FLAGS: dict[str, dict[str, Any]] = {
    "target": {}, "warehouse": {}, "options": {"type": json_arg}, "older_than": {"type": json_arg},
    "older_than_age": {}, "dry_run": {}, "num_tasks": {},
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
    import pyarrow as pa
    from pyspark.sql import types as T

    from airflow_paimon.format import Catalog
    from airflow_paimon.format.upkeep.orphans import (
        MAX_LISTED_FILES,
        orphan_file,
        orphan_threshold,
        referenced_names,
        remove_empty_data_dirs,
        still_unreferenced,
    )
    from airflow_paimon.format.upkeep.results import OrphanFile, OrphanResult
    from airflow_paimon.format.upkeep.roots import check_supported
    from airflow_paimon.format.values import boolean, count, duration, instant
    from airflow_paimon.spark.tasks import default_tasks, run_per_group

    started = time.monotonic()
    unknown = set(spec) - set(FLAGS)
    if unknown:
        raise ValueError(f"unknown arguments {sorted(unknown)}; known: {sorted(FLAGS)}")
    if not spec.get("target") or not spec.get("warehouse"):
        raise ValueError("orphan cleanup needs target and warehouse")
    table = Catalog(spec["warehouse"], spec.get("options") or {}).get_table(spec["target"])
    dry_run = boolean(spec.get("dry_run"), "dry_run", default=False)
    older_than: Any = spec.get("older_than")
    if older_than is not None:
        older_than = instant(older_than, "older_than")
    elif spec.get("older_than_age"):
        older_than = duration(spec["older_than_age"], "older_than_age")
    threshold = orphan_threshold(older_than, int(time.time() * 1000))
    tasks = None if spec.get("num_tasks") is None else count(spec["num_tasks"], "num_tasks")
    check_supported(table)
    io, root, depth = table.io, table.path, len(table.partition_keys)
    data_directory = table.core_options.data_file_directory
    k = default_tasks(spark) if tasks is None else tasks
    units = _listing_units(io, root, depth, 4 * k)
    referenced = spark.sparkContext.broadcast(frozenset(referenced_names(table)))
    schema = T.StructType([T.StructField("path", T.StringType()), T.StructField("size", T.LongType()),
                           T.StructField("mtime_ms", T.LongType()), T.StructField("scanned", T.LongType())])

    def list_unit(i: int) -> Iterator[pa.Table]:
        directory, recursive = units[i]
        paths, sizes, mtimes, scanned = [], [], [], 0
        for info in io.walk(directory) if recursive else io.list_dir(directory):
            scanned += 1
            found = orphan_file(info, root, depth, referenced.value, threshold, data_directory)
            if found is not None:
                paths.append(found.path)
                sizes.append(found.size)
                mtimes.append(found.mtime_ms)
        # The found files, then one row (path null) carrying how many files this unit holds.
        counts = [0] * len(paths) + [scanned]
        yield pa.table({"path": pa.array(paths + [None], pa.string()), "size": pa.array(sizes + [0], pa.int64()),
                        "mtime_ms": pa.array(mtimes + [0], pa.int64()), "scanned": pa.array(counts, pa.int64())})

    n = len(units)
    rows = run_per_group(spark, [1] * n, list_unit, schema, 4 * k).collect()
    result = OrphanResult(dry_run, threshold, target=table.identifier, listing_units=n,
                          scanned=sum(r["scanned"] for r in rows))
    result.files = sorted((OrphanFile(r["path"], r["size"], r["mtime_ms"]) for r in rows if r["path"] is not None),
                          key=lambda f: f.path)
    if not dry_run and result.files:
        result.files = still_unreferenced(table, result.files)
    paths = result.paths
    if dry_run or not paths:
        result.seconds = time.monotonic() - started
        return result.to_dict(MAX_LISTED_FILES)
    chunks = max(1, min(len(paths), k * 2))

    def delete_chunk(c: int) -> Iterator[pa.Table]:
        for p in paths[c::chunks]:
            io.delete(p)
        yield pa.table({"deleted": pa.array([len(paths[c::chunks])], pa.int64())})

    deleted = run_per_group(spark, [1] * chunks, delete_chunk, T.StructType([T.StructField("deleted", T.LongType())]),
                            chunks).collect()
    remove_empty_data_dirs(table, paths)
    result.files_deleted = sum(r["deleted"] for r in deleted)
    result.seconds = time.monotonic() - started
    return result.to_dict(MAX_LISTED_FILES)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    spec = load_spec(argv, FLAGS)
    spark = spark_session(f"paimon-remove-orphans-{spec.get('target')}")
    return run_remove_orphans(spark, spec)


if __name__ == "__main__":
    sys.exit(run_app(main))
