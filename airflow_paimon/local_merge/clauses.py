"""The MERGE clauses compiled to one DuckDB query over the joined rows of a batch of buckets.

The query computes, per joined row, the first clause of its kind (matched, not matched, not matched by source)
whose condition holds -- with the ``sequence.field`` guard on matched rows -- and the values and row kind that
clause writes, exactly as the Spark application's expressions do (spark/merge/actions.py): a condition that is
NULL does not hold, a column an update does not assign keeps the target's value, an insert leaves it NULL, a
delete writes the target row's key, and every value is cast to its column's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import duckdb
import pyarrow as pa

from airflow_paimon.format import Table
from airflow_paimon.format.errors import MergeClauseError
from airflow_paimon.merge import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause
from airflow_paimon.store_assignment import check_store_assignment, sql_type_name

from .translate import ColumnSide, NotTranslatable, quote, to_duckdb

__all__ = ["ROW_KINDS", "CompiledMerge", "compile_merge", "duckdb_type"]

ROW_KINDS = {"update": 2, "delete": 3, "insert": 0}   # +U, -D, +I
HAS_S, HAS_T, ACTION = "__has_s", "__has_t", "__action"


def duckdb_type(t: pa.DataType) -> str | None:
    """The DuckDB type Spark's cast to a column of Arrow type `t` corresponds to (None: leave it to Arrow)."""
    simple = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
              pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN", pa.date32(): "DATE",
              pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.binary(): "BLOB"}
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz is not None else "TIMESTAMP"
    return None


@dataclass
class CompiledMerge:
    """The query (over a relation named ``joined``) and the columns it reads."""

    sql: str
    output: pa.Schema   # the target's columns, then __kind

    def run(self, con: duckdb.DuckDBPyConnection, joined: pa.Table) -> pa.Table:
        con.register("joined", joined)
        try:
            out = con.sql(self.sql).to_arrow_table()
        finally:
            con.unregister("joined")
        return out.cast(self.output)


def _sequence_guard(fields: Sequence[tuple[str, str]], descending: bool) -> str:
    """s's sequence fields are not older than t's, field by field, a null older than any value (as
    spark/merge/actions.sequence_guard, Paimon's comparator)."""
    expr = "TRUE"
    for s, t in reversed(fields):
        later = f"({s} < {t})" if descending else f"({s} > {t})"
        newer = f"(({s} IS NOT NULL AND {t} IS NULL) OR COALESCE({later}, FALSE))"
        expr = f"({newer} OR ({s} IS NOT DISTINCT FROM {t} AND {expr}))"
    return expr


def compile_merge(con: duckdb.DuckDBPyConnection, table: Table, clauses: Sequence[MergeClause],
                  joined_schema: pa.Schema, source_columns: Mapping[str, str], target_columns: Mapping[str, str],
                  guard: Sequence[tuple[str, str]], passthrough: Sequence[str] = ()) -> CompiledMerge:
    """The clauses as one query over the joined rows (`joined_schema`); `source_columns`/`target_columns` map a
    side's column names to the joined columns. Checked before any row is read: every reference resolves, each
    condition is boolean, each value is storable into its column (Spark's ANSI store assignment) --
    MergeClauseError / StoreAssignmentError otherwise; NotTranslatable for SQL only Spark evaluates exactly.
    `passthrough`: joined columns copied to the output as they are (where an append target's rows are)."""
    logical = table.arrow_schema()
    types = {f.name: f.type for f in joined_schema}
    s_side = ColumnSide("s", source_columns, {n: types[j] for n, j in source_columns.items()})
    t_side = ColumnSide("t", target_columns, {n: types[j] for n, j in target_columns.items()})
    sides_of = {MATCHED: [s_side, t_side], NOT_MATCHED: [s_side], NOT_MATCHED_BY_SOURCE: [t_side]}
    kind_of = {MATCHED: f"({HAS_S} AND {HAS_T})", NOT_MATCHED: f"({HAS_S} AND NOT {HAS_T})",
               NOT_MATCHED_BY_SOURCE: f"(NOT {HAS_S} AND {HAS_T})"}
    if guard:
        newer = _sequence_guard([(quote(s), quote(t)) for s, t in guard], table.core_options.sequence_descending)
        kind_of[MATCHED] = f"({kind_of[MATCHED]} AND {newer})"
    t_lower = {n.lower(): j for n, j in target_columns.items()}
    s_lower = {n.lower(): j for n, j in source_columns.items()}
    empty = joined_schema.empty_table()
    con.register("joined", empty)
    try:
        branches: list[str] = []
        values: dict[str, list[str]] = {f.name: [] for f in logical}
        typed: list[tuple[MergeClause, pa.Field, str]] = []
        for idx, c in enumerate(clauses):
            label = f"clause #{idx + 1} ({c.describe()})"
            cond = kind_of[c.when]
            if c.condition:
                sql = to_duckdb(c.condition, sides_of[c.when], label, "condition")
                ctype = _type_of(con, sql, label, "condition")
                if ctype != pa.bool_() and ctype != pa.null():
                    raise MergeClauseError(
                        f"{label}: the condition {c.condition!r} is of type {sql_type_name(ctype)}, not boolean; "
                        "a MERGE condition must be a boolean expression (e.g. compare it: ... = 1)")
                cond = f"({cond} AND COALESCE(({sql}), FALSE))"
            branches.append(f"WHEN {cond} THEN {idx}")
            given = ({k.lower(): v for k, v in c.assignments.items()}
                     if isinstance(c.assignments, Mapping) else {})
            for f in logical:
                t_value = quote(t_lower[f.name.lower()]) if f.name.lower() in t_lower else "NULL"
                if c.action == "delete":
                    value = t_value
                elif c.is_star:
                    value = quote(s_lower[f.name.lower()])
                elif f.name.lower() in given:
                    value = f"({to_duckdb(given[f.name.lower()], sides_of[c.when], label, f'value of {f.name!r}')})"
                    typed.append((c, f, value))
                elif c.action == "update":
                    value = t_value
                else:
                    value = "NULL"
                values[f.name].append(f"WHEN {idx} THEN {value}")
        if typed:
            got = con.sql("SELECT " + ", ".join(f"{v} AS v{i}" for i, (_, _, v) in enumerate(typed)) +
                              " FROM joined").to_arrow_table().schema
            for (c, f, _), gf in zip(typed, got):
                check_store_assignment(f.name, gf.type, f.type, what=f"the MERGE clause {c.describe()}")
                if (pa.types.is_floating(gf.type) or pa.types.is_decimal(gf.type)) and (
                        pa.types.is_integer(f.type)):
                    raise NotTranslatable(
                        f"the MERGE clause {c.describe()}: the value of {f.name!r} is {sql_type_name(gf.type)} "
                        f"stored into {sql_type_name(f.type)}; Spark truncates where the in-process engine "
                        "rounds; run this MERGE on Spark")
        for c in clauses:
            if c.is_star:
                for f in logical:
                    src = s_lower[f.name.lower()]
                    check_store_assignment(f.name, types[src], f.type, what=f"the MERGE clause {c.describe()}")
    finally:
        con.unregister("joined")
    action = "CASE " + " ".join(branches) + " END"
    cols = []
    for f in logical:
        dtype = duckdb_type(f.type)
        case = f"CASE {ACTION} " + " ".join(values[f.name]) + " END"
        cols.append(f"CAST({case} AS {dtype}) AS {quote(f.name)}" if dtype else f"{case} AS {quote(f.name)}")
    kinds = " ".join(f"WHEN {i} THEN {ROW_KINDS[c.action]}" for i, c in enumerate(clauses))
    cols.append(f"CAST(CASE {ACTION} {kinds} END AS TINYINT) AS __kind")
    cols += [quote(c) for c in passthrough]
    sql = (f"SELECT {', '.join(cols)} FROM (SELECT *, {action} AS {ACTION} FROM joined) "
           f"WHERE {ACTION} IS NOT NULL")
    # Nullable: a delete leaves the columns it did not read NULL, as the Spark application does.
    output = pa.schema([pa.field(f.name, f.type) for f in logical] + [pa.field("__kind", pa.int8())] +
                       [joined_schema.field(c) for c in passthrough])
    return CompiledMerge(sql, output)


def _type_of(con: duckdb.DuckDBPyConnection, sql: str, label: str, what: str) -> pa.DataType:
    try:
        return con.sql(f"SELECT ({sql}) AS v FROM joined").to_arrow_table().schema.field(0).type
    except duckdb.Error as e:
        raise MergeClauseError(f"{label}: the {what} cannot be evaluated: {str(e).splitlines()[0]}") from None

