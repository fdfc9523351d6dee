"""The MERGE clauses as Spark expressions over the joined rows: which clause applies to a row, the values it
writes and the row kind, checked against Spark's store-assignment rules before any job runs.

The joined rows are seen as two structs, ``s`` (the source row) and ``t`` (the target row), so that the clauses'
SQL (``s.v > t.v``) is evaluated by Spark itself.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format.errors import MergeClauseError
from airflow_paimon.merge import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause, is_identity, resolve_column
from airflow_paimon.store_assignment import check_store_assignment

from ..schema_map import spark_to_arrow_type
from ..tables.buckets import BUCKET_COLUMN
from ..tables.changelog import BEFORE_SEQUENCE, HAS_BEFORE, before_column
from .plan import TARGET_SEQUENCE, MergePlan, source_column

__all__ = ["ROW_KINDS", "sequence_guard", "clause_value", "check_conditions", "check_assignments", "changed_rows"]

ROW_KINDS = {"update": 2, "delete": 3, "insert": 0}   # +U, -D, +I


def _as_structs(joined: DataFrame, source_names: Sequence[str], target_columns: Sequence[str],
                *extra: str) -> DataFrame:
    return joined.select(
        F.struct(*[F.col(f"__s_{i}").alias(c) for i, c in enumerate(source_names)]).alias("s"),
        F.struct(*[F.col(f"__t_{i}").alias(c) for i, c in enumerate(target_columns)]).alias("t"), *extra)


def sequence_guard(fields: Sequence[str], descending: bool) -> Column:
    """s's sequence fields are not older than t's, by Paimon's comparator (versions.py): compared field by field,
    a null is older than any value, and with `descending` a smaller value is the newer one. So a matched clause
    fires exactly when the row it writes would win over the target row on read."""
    expr = F.lit(True)
    for f in reversed(fields):
        s, t = F.col("s").getField(f), F.col("t").getField(f)
        later = (s < t) if descending else (s > t)
        newer = (s.isNotNull() & t.isNull()) | F.coalesce(later, F.lit(False))
        expr = newer | (s.eqNullSafe(t) & expr)
    return expr


def clause_value(c: MergeClause, name: str, source_columns: Sequence[str], target_columns: Sequence[str]) -> Column:
    """The value clause `c` gives target column `name`."""
    t_value = F.col("t").getField(name) if name in target_columns else F.lit(None)
    if c.action == "delete":
        return t_value
    if c.is_star:
        return F.col("s").getField(source_column(source_columns, name))
    given = {k.lower(): v for k, v in c.assignments.items()} if isinstance(c.assignments, Mapping) else {}
    if name.lower() in given:
        return F.expr(given[name.lower()])
    if c.action == "update":
        return t_value
    return F.lit(None)


def spark_arrow_type(t: T.DataType) -> pa.DataType | None:
    """The Arrow type of Spark type `t` for the store-assignment rules (None: no Arrow equivalent)."""
    if isinstance(t, T.NullType):
        return pa.null()
    try:
        return spark_to_arrow_type(t)
    except TypeError:
        return None


def check_assignments(spark: SparkSession, plan: MergePlan) -> None:
    """StoreAssignmentError for the first value a clause assigns that Spark's MERGE would not store into its
    column. The types come from analysing the clauses' values over an empty frame of the joined rows' shape,
    before any job runs."""
    empty = _as_structs(spark.createDataFrame([], plan.joined_schema), plan.source_names, plan.target_columns)
    check_conditions(empty, plan.clauses)
    logical = plan.table.arrow_schema()
    checks = [(c, f.name, clause_value(c, f.name, plan.source_names, plan.target_columns))
              for c in plan.clauses if c.action != "delete" for f in logical]
    if not checks:
        return
    types = empty.select(*[v.alias(f"__v{i}") for i, (_, _, v) in enumerate(checks)]).schema.fields
    for (c, name, _), f in zip(checks, types):
        check_store_assignment(name, spark_arrow_type(f.dataType), logical.field(name).type,
                               source_name=f.dataType.simpleString(), what=f"the MERGE clause {c.describe()}")


def check_conditions(rows: DataFrame, clauses: Sequence[MergeClause]) -> None:
    """MergeClauseError for a condition that is not boolean (Spark would otherwise cast a number to one)."""
    conditions = [(i, c, c.condition) for i, c in enumerate(clauses, start=1) if c.condition]
    if not conditions:
        return
    types = rows.select(*[F.expr(cond).alias(f"__c{i}") for i, _, cond in conditions]).schema.fields
    for (i, c, _), f in zip(conditions, types):
        if not isinstance(f.dataType, (T.BooleanType, T.NullType)):
            raise MergeClauseError(
                f"clause #{i} ({c.describe()}): the condition {c.condition!r} is of type {f.dataType.simpleString()}, "
                "not boolean; a MERGE condition must be a boolean expression (e.g. compare it: ... = 1)")


def _first_clause(plan: MergePlan) -> Column:
    """The index of the first clause whose kind and condition hold for the row (null: none)."""
    has_s, has_t = F.col("__has_s"), F.col("__has_t")
    when_cond = {MATCHED: has_s & has_t, NOT_MATCHED: has_s & ~has_t, NOT_MATCHED_BY_SOURCE: ~has_s & has_t}
    if plan.guard_fields:
        when_cond[MATCHED] = when_cond[MATCHED] & sequence_guard(plan.guard_fields,
                                                                 plan.table.core_options.sequence_descending)
    branches = []
    for idx, c in enumerate(plan.clauses):
        cond = when_cond[c.when]
        if c.condition:
            cond = cond & F.coalesce(F.expr(c.condition).cast("boolean"), F.lit(False))
        branches.append((cond, F.lit(idx)))
    return _case(branches)


def _by_clause(plan: MergePlan, value: Any) -> Column:
    """A column taking ``value(clause)`` for the rows the clause applies to."""
    return _case([(F.col("__action") == idx, value(c)) for idx, c in enumerate(plan.clauses)])


def _case(branches: Sequence[tuple[Column, Column]]) -> Column:
    """CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... END (null when no condition holds)."""
    (cond, value), *others = branches
    expr = F.when(cond, value)
    for cond, value in others:
        expr = expr.when(cond, value)
    return expr


def _moves_keys(plan: MergePlan) -> bool:
    """Whether an INSERT assigns a primary-key column anything but the source's join column of that name: its
    rows may then belong to another bucket than the one they were joined in."""
    names = plan.table.schema().field_names
    for c in plan.clauses:
        if c.action == "insert" and isinstance(c.assignments, Mapping):
            given = {resolve_column(names, k): v for k, v in c.assignments.items()}
            if any(not (is_identity(given[k], k) and k in plan.on) for k in plan.table.primary_keys):
                return True
    return False


def changed_rows(joined: DataFrame, plan: MergePlan) -> tuple[DataFrame, bool]:
    """The rows the clauses write (target columns, ``__kind`` and the bucket they were joined in), and whether
    that bucket may be wrong for them (`_moves_keys`: then they need their bucket assigned again). With
    `plan.before_images`, each row also carries the target row it replaces (tables/changelog.py)."""
    extra = [TARGET_SEQUENCE] if plan.before_images else []
    rows = _as_structs(joined, plan.source_names, plan.target_columns, "__has_s", "__has_t", BUCKET_COLUMN, *extra)
    rows = rows.withColumn("__action", _first_clause(plan)).where(F.col("__action").isNotNull())
    outputs = [
        _by_clause(plan, lambda c, name=name: clause_value(c, name, plan.source_columns, plan.target_columns))
        .cast(plan.target_types[name]).alias(name)
        for name in plan.table.schema().field_names]
    kind = _by_clause(plan, lambda c: F.lit(ROW_KINDS[c.action]))
    images = []
    if plan.before_images:
        images = [F.col("__has_t").alias(HAS_BEFORE), F.col(TARGET_SEQUENCE).alias(BEFORE_SEQUENCE)] + \
            [F.col("t").getField(n).alias(before_column(n)) for n in plan.table.schema().field_names]
    return rows.select(*outputs, kind.cast("byte").alias("__kind"), F.col(BUCKET_COLUMN), *images), _moves_keys(plan)
