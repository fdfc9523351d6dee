"""A plain upsert on Spark: the source rows become new level-0 files; no target data is read.

A small increment of files (Spark's size estimate up to ``single_task_bytes``) is read, bucketed and written by
one task, without a shuffle; a bigger one is shuffled by bucket to many tasks.
"""

from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_paimon.format import Table
from airflow_paimon.format.commit import Transaction
from airflow_paimon.store_assignment import check_store_assignment

from ..tables.write import write_changes
from ..tasks import estimated_bytes
from .actions import spark_arrow_type
from .plan import source_column
from .result import Written
from .spec import MergeSpec

__all__ = ["upsert_on_spark"]


def upsert_on_spark(spark: SparkSession, spec: MergeSpec, table: Table, tx: Transaction, source: DataFrame,
                    source_info: Mapping[str, Any]) -> Written:
    given = {f.name: f.dataType for f in source.schema.fields}
    for f in table.arrow_schema():
        column = given[source_column(source.columns, f.name)]
        check_store_assignment(f.name, spark_arrow_type(column), f.type, source_name=column.simpleString())
    cols = [F.col(source_column(source.columns, n)).alias(n) for n in table.schema().field_names]
    # A small increment of files is read and written by one task: no shuffle, one Python worker.
    size = estimated_bytes(source) if source_info.get("kind") == "files" else None
    single = spec.num_tasks is None and size is not None and size <= spec.single_task_bytes
    res = write_changes(spark, table, source.select(*cols), kind_column=None, transaction=tx, duplicates="error",
                        num_tasks=spec.num_tasks, single_task=single, what="the MERGE source")
    return Written(res.snapshot, res.rows, "upsert", timings=res.seconds, details={"single_task": single})
