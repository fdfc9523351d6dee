"""A table's change feed (`Table.changes`) as a Spark DataFrame: the same rows and columns (the table's, then
`_change_type`, `_commit_version`, `_commit_timestamp`) for every mode.

The driver plans with the format library (`plan_changes`: bounds, mode, every check, and the files to read, from
metadata only), so a range the mode cannot answer raises before any job; tasks read the planned units: one
changelog or data file of one snapshot (changelog, delta), or one (partition, bucket) whose files differ between
the two ends (diff; a partition whose buckets were rescaled between the ends is one unit, as the library
compares it whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from airflow_paimon.format import Table
from airflow_paimon.format.changes.diff import diff_batches
from airflow_paimon.format.changes.feed import ChangePlan, plan_changes
from airflow_paimon.format.changes.rows import change_batch, read_with_kinds
from airflow_paimon.format.manifest import ManifestEntry

from .schema_map import spark_schema
from .tasks import run_per_group

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["read_change_feed_df"]


def _diff_units(plan: ChangePlan,
                deletion_vectors: bool = False) -> list[tuple[list[ManifestEntry], list[ManifestEntry]]]:
    """The live files of both ends cut into independent units, dropping units both ends list alike."""
    before, after = plan.ends
    counts: dict[bytes, set[int]] = {}
    for e in before + after:
        counts.setdefault(e.partition, set()).add(e.total_buckets)
    rescaled = {p for p, c in counts.items() if len(c) > 1}
    units: dict[tuple[bytes, int], tuple[list[ManifestEntry], list[ManifestEntry]]] = {}
    for side, entries in enumerate((before, after)):
        for e in entries:
            key = (e.partition, -1 if e.partition in rescaled else e.bucket)
            units.setdefault(key, ([], []))[side].append(e)
    # A deletion-vector table's bucket may change with the same files (their vectors changed): every bucket is a
    # unit, and the diff reads only those whose files or vectors differ.
    return [u for _, u in sorted(units.items())
            if deletion_vectors or {e.file.file_name for e in u[0]} != {e.file.file_name for e in u[1]}]


def read_change_feed_df(spark: SparkSession, table: Table, start: Any = None, end: Any = None, *,
                        mode: str = "auto", columns: Sequence[str] | None = None,
                        filter: "ds.Expression | None" = None, consumer_id: str | None = None,
                        num_tasks: int | None = None) -> DataFrame:
    """`table.changes(start, end, mode=..., columns=..., filter=..., consumer_id=...)` as a DataFrame (same
    bounds: start exclusive, end inclusive; same errors, raised on the driver before any job)."""
    plan = plan_changes(table, start, end, columns=columns, filter=filter, mode=mode, consumer_id=consumer_id)
    schema, names = plan.schema, plan.names
    out_schema = spark_schema(schema)
    if plan.empty:
        return spark.createDataFrame([], out_schema)
    if plan.mode == "diff":
        assert plan.end is not None and plan.end.snapshot is not None
        version, millis = plan.end.id, plan.end.snapshot.time_millis
        units = _diff_units(plan, table.core_options.deletion_vectors)
        snapshots = (plan.start.snapshot if plan.start is not None else None, plan.end.snapshot)

        def diff(i: int) -> Iterator[pa.Table]:
            before, after = units[i]
            for rows, kinds in diff_batches(table, before, after, names, snapshots):
                yield change_batch(rows, kinds, version, millis, schema, filter)

        sizes = [sum(e.file.row_count for e in b + a) for b, a in units]
        return run_per_group(spark, sizes, diff, out_schema, num_tasks)
    files = [(snap.id, snap.time_millis, e) for snap, entries in plan.planned for e in entries]

    def read(i: int) -> Iterator[pa.Table]:
        version, millis, e = files[i]
        data, kinds = read_with_kinds(table, e.partition, e.bucket, e.file, names)
        yield change_batch(data, kinds, version, millis, schema, filter)

    return run_per_group(spark, [e.file.row_count for _, _, e in files], read, out_schema, num_tasks)
