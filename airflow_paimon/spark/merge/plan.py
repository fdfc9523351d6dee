"""What a general MERGE will do, decided on the driver before any job: the clauses, the join columns, which target
columns and buckets it reads, how the source is shaped for the join, and how many tasks run it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format import Split, Table
from airflow_paimon.format.commit import Transaction
from airflow_paimon.format.kernels import CHANGE_COLUMN
from airflow_paimon.format.scan import ScanPlanner
from airflow_paimon.merge import (
    NOT_MATCHED_BY_SOURCE,
    MergeClause,
    matched_delete,
    matched_update,
    normalize_on,
    not_matched_insert,
    parse_clauses,
    resolve_column,
    target_columns_needed,
    validate_clauses,
)

from ..schema_map import spark_schema
from ..tables.buckets import BUCKET_COLUMN
from ..tables.changelog import images_usable
from ..tasks import estimated_bytes
from .spec import MergeSpec

__all__ = ["TARGET_SEQUENCE", "source_column", "merge_clauses",
           "MergePlan", "plan_merge"]

TARGET_SEQUENCE = "__t_seq"


def source_column(columns: Sequence[str], name: str) -> str:
    """The source column that feeds target column `name` (as Spark resolves names)."""
    found = resolve_column(columns, name)
    if found is None:
        raise ValueError(f"the MERGE source has no column {name!r} (source columns: {list(columns)})")
    return found


def merge_clauses(spec: MergeSpec, table: Table, source_columns: Sequence[str],
                  source: Mapping[str, Any]) -> tuple[list[str], list[MergeClause]]:
    """The join columns and the checked clauses; without clauses, a source of changes is mirrored (deleted rows
    delete, the others upsert)."""
    names = table.schema().field_names
    on = normalize_on(spec.on, table.primary_keys, names)
    if spec.clauses is None and source.get("kind") == "changes":
        clauses = [matched_delete(condition=f"s.{CHANGE_COLUMN} = '-D'"), matched_update(set="*"),
                   not_matched_insert(values="*", condition=f"s.{CHANGE_COLUMN} <> '-D'")]
    else:
        clauses = parse_clauses(spec.clauses)
    validate_clauses(clauses, target_columns=names, primary_keys=table.primary_keys, on=on,
                     source_columns=source_columns)
    return on, clauses


@dataclass
class MergePlan:
    """A general MERGE, planned.

    `source` is the source with its join columns cast to and named as the target's (they are joined in Arrow);
    `source_columns` are the columns as the source gave them. `splits` are the base snapshot's buckets by
    (partition, bucket). Joined rows carry the source columns as ``__s_<i>``, the target columns read
    (`target_columns`) as ``__t_<i>``, ``__has_s``/``__has_t`` and the bucket (`joined_schema`); with
    `before_images` (a `lookup` target) every target column is read, and the target row's sequence number
    (``__t_seq``), so that the changed rows carry their before-images to the write."""

    table: Table
    tx: Transaction
    clauses: list[MergeClause]
    on: list[str]
    source: DataFrame
    source_columns: list[str]
    target_columns: list[str]
    target_types: dict[str, T.DataType]
    guard_fields: list[str]
    full: bool
    splits: dict[tuple[Any, ...], Split]
    num_tasks: int
    fixed_tasks: int | None
    small_source: bool
    joined_schema: T.StructType
    before_images: bool = False

    @property
    def source_names(self) -> list[str]:
        return list(self.source.columns)


def plan_merge(spark: SparkSession, spec: MergeSpec, table: Table, tx: Transaction, source: DataFrame,
               source_info: Mapping[str, Any], on: list[str], clauses: list[MergeClause]) -> MergePlan:
    base = tx.base
    target_types = {f.name: f.dataType for f in spark_schema(table.arrow_schema()).fields}
    src_cols = list(source.columns)
    src_lower = {c.lower(): c for c in src_cols}
    seq_fields = list(table.core_options.sequence_fields)
    guard_fields: list[str] = []
    if spec.honour_sequence_field and seq_fields and all(f.lower() in src_lower for f in seq_fields):
        guard_fields = seq_fields
    images = images_usable(table)
    # A changelog shows whole rows: the rows a delete writes (input) and the before-images (lookup).
    whole = images or table.core_options.changelog_producer == "input"
    tcols = table.schema().field_names if whole else target_columns_needed(
        table.schema().field_names, table.primary_keys, clauses, on, guard_fields,
        delete_reads=table.core_options.sequence_fields)
    key_cols = {k: src_lower[k.lower()] for k in on}
    sel = []
    for c in src_cols:
        tname = next((k for k, v in key_cols.items() if v == c), None)
        sel.append(F.col(c).cast(target_types[tname]).alias(tname) if tname else F.col(c))
    src = source.select(*sel)
    splits = {}
    if base is not None:
        for sp in ScanPlanner(table).plan(table.file_entries(base), None, base.id):
            splits[(sp.partition, sp.bucket)] = sp
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200)
    # An unpartitioned table has one task per bucket at most (a dynamic-bucket one: its buckets and its new keys).
    buckets = table.core_options.bucket if not table.is_dynamic_bucket else len(splits) + 1
    n = spec.num_tasks or (min(buckets, shuffle) if not table.partition_keys else shuffle)
    src_types = {f.name: f.dataType for f in src.schema.fields}
    joined_schema = T.StructType(
        [T.StructField(f"__s_{i}", src_types[c], True) for i, c in enumerate(src.columns)] +
        [T.StructField(f"__t_{i}", target_types[c], True) for i, c in enumerate(tcols)] +
        [T.StructField("__has_s", T.BooleanType(), True), T.StructField("__has_t", T.BooleanType(), True),
         T.StructField(BUCKET_COLUMN, T.IntegerType(), True)] +
        ([T.StructField(TARGET_SEQUENCE, T.LongType(), True)] if images else []))
    size = estimated_bytes(source) if source_info.get("kind") == "files" else None
    small = spec.num_tasks is None and size is not None and size <= spec.single_task_bytes
    return MergePlan(table, tx, clauses, on, src, src_cols, tcols, target_types, guard_fields,
                     any(c.when == NOT_MATCHED_BY_SOURCE for c in clauses), splits, n, spec.num_tasks, small,
                     joined_schema, images)
