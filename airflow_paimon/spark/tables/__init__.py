"""Paimon tables in Spark: read a table (any snapshot, tag or time) as a DataFrame, read what changed between two
snapshots, write a DataFrame of changes in one exactly-once commit.

* ``read``: ``read_table_df`` / ``splits_to_df`` (tasks read splits with merge-on-read);
* ``changes``: ``read_changes_df`` (only buckets whose files differ are read and compared);
* ``buckets``: the bucket Paimon gives each row, and the shuffle that brings a bucket into one task;
* ``write``: ``write_changes`` (one task per bucket writes files; the driver commits once);
* ``task_errors``: the library's errors raised in tasks, recovered on the driver.
"""

from airflow_paimon.format.errors import DuplicateKeyError
from airflow_paimon.format.kernels import CHANGE_COLUMN, diff_rows

from .buckets import BUCKET_COLUMN, assign_buckets, by_bucket
from .changes import read_changes_df
from .read import partition_filter, read_table_df, splits_to_df
from .task_errors import unwrap_task_error
from .write import KIND_CODES, KIND_COLUMN, WriteResult, write_changes

__all__ = [
    "KIND_COLUMN", "CHANGE_COLUMN", "BUCKET_COLUMN", "KIND_CODES", "DuplicateKeyError", "WriteResult",
    "read_table_df", "read_changes_df", "splits_to_df", "assign_buckets", "by_bucket", "write_changes",
    "diff_rows", "partition_filter", "unwrap_task_error",
]
