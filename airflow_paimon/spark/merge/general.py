"""A MERGE with conditions, deletes or NOT MATCHED BY SOURCE: join, evaluate the clauses, write the changes.

The changed rows (increment-sized) are shuffled once more by bucket and written, one task per bucket; no file is
written before every bucket was joined, so a duplicate source key fails the job before any write.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ..tables.buckets import BUCKET_COLUMN, by_bucket
from ..tables.changelog import before_columns
from ..tables.write import write_changes
from .actions import changed_rows, check_assignments
from .join import JoinStats, joined_rows
from .plan import MergePlan
from .result import Written

__all__ = ["general_merge"]


def general_merge(spark: SparkSession, plan: MergePlan) -> Written:
    table = plan.table
    check_assignments(spark, plan)
    stats = JoinStats(spark)
    out, rebucket = changed_rows(joined_rows(spark, plan, stats), plan)
    images = plan.before_images and not rebucket
    if rebucket or table.is_dynamic_bucket:
        # An inserted key may land in another bucket, where a target row may hold it: the write looks it up. A
        # dynamic-bucket table's write assigns new keys their buckets itself (tables/dynamic.py); a key the target
        # holds was joined in its HASH-index bucket, so the before-images it carries stay right.
        out = out.drop(BUCKET_COLUMN, *(before_columns(table) if plan.before_images and not images else []))
        rebucket = True
    else:
        # A second, increment-sized shuffle by the same (partition, bucket): the tasks that write files start only
        # once every bucket was joined (so a duplicate source key fails the job before any file is written), and
        # they reuse the joining tasks' Python workers instead of starting a second worker per task.
        out = by_bucket(out, [F.col(p) for p in table.partition_keys] + [F.col(BUCKET_COLUMN)], plan.fixed_tasks)
    res = write_changes(spark, table, out, kind_column="__kind", transaction=plan.tx, duplicates="error",
                        bucket_column=None if rebucket else BUCKET_COLUMN, num_tasks=plan.fixed_tasks,
                        what="the MERGE output", before_images=images)
    details = {"target_columns_read": plan.target_columns, "small_source": plan.small_source}
    if plan.guard_fields:
        details["sequence_guard"] = plan.guard_fields
    return Written(res.snapshot, res.rows, "merge", timings=res.seconds, target_splits_read=stats.splits.value,
                   target_rows_read=stats.rows.value, details=details)
