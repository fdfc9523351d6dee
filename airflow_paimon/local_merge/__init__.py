"""MERGE in this process, without Spark or a JVM: the clauses' Spark SQL evaluated by DuckDB over Arrow.

* ``translate``: Spark SQL -> DuckDB SQL (sqlglot), refusing what the engines may evaluate differently;
* ``clauses``: the clauses as one query over the joined rows, checked before any row is read;
* ``engine``: plan (buckets, columns, memory), join bucket by bucket, write the changed rows, commit once;
* ``source``: local Parquet sources read as Spark reads them;
* ``choose``: ``engine="auto" | "local"``: run here, or say why Spark must.

Imports the format library and the clause model only (no Airflow, no pyspark).
"""

from .choose import ENGINES, Decision, LocalMergeRefused, merge_here_or_refuse
from .engine import DEFAULT_MEMORY_BUDGET, merge_in_process
from .translate import NotTranslatable

__all__ = ["ENGINES", "DEFAULT_MEMORY_BUDGET", "Decision", "LocalMergeRefused", "NotTranslatable",
           "merge_here_or_refuse", "merge_in_process"]
