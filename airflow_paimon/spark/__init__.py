"""PySpark applications (merge, compaction, orphan cleanup, change export) and the helpers that read and write
Paimon tables from Spark with the bundled format library. No Airflow imports.

* ``tables``: ``read_table_df`` / ``read_changes_df`` (a table, or what changed between two snapshots, as a
  DataFrame) and ``write_changes`` (a DataFrame of changes -> one exactly-once commit);
* ``changes``: ``read_change_feed_df`` (a table's change feed, every mode, as a DataFrame; also importable
  from this package) and ``feed_units`` (the same feed as planned units, for jobs that write them);
* ``tasks``: work spread over Spark tasks (``run_per_group``: one task per balanced group of planned units;
  ``run_groups`` with ``contiguous_groups``: one task per stretch of ordered units; ``bucket_groups``: a task's
  rows cut per (partition, bucket));
* ``merge`` / ``merge_app``: MERGE INTO a primary-key table (``merge_app.py`` is what spark-submit runs);
* ``compact_app``: full compaction of primary-key buckets, small-file merging of append tables;
* ``orphans_app``: orphan-file cleanup that lists and deletes in parallel;
* ``export_app``: a range of a change feed written as an export folder (``ExportChangesOperator`` on Spark);
* ``common``: arguments, commit identifiers, result lines, and ``py_files_zip`` for clusters;
* ``schema_map`` / ``store_assignment``: Arrow <-> Spark types, and which values a MERGE may store.

Submodules import pyspark; this package itself does not.
"""

from typing import Any

from .common import application_path, py_files_zip, stable_int64

__all__ = ["application_path", "py_files_zip", "stable_int64", "read_change_feed_df"]


def __getattr__(name: str) -> Any:
    """`read_change_feed_df` on first use: importing it starts pyspark's imports, which this package avoids."""
    if name == "read_change_feed_df":
        from .changes import read_change_feed_df

        return read_change_feed_df
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
