"""MERGE conditions and expressions, written in Spark SQL, as DuckDB SQL over the joined rows' flat columns.

sqlglot parses the Spark SQL; only constructs whose meaning is the same in both engines are accepted (the
`_EXACT` node types below), and everything else -- division (Spark and DuckDB differ on division by zero and
on integer results in ANSI mode), rounding, functions whose results depend on the session (``current_date``),
casts to a string of values whose text differs (doubles, timestamps), user functions -- is refused with
`NotTranslatable`, so that the MERGE runs on Spark instead of giving a different answer.

Column references: ``s.col`` becomes the joined rows' source column, ``t.col`` the target's; an unqualified
name must be a column of exactly one of the sides the clause can see (Spark rejects an ambiguous one).
"""

from __future__ import annotations

from typing import Callable, Mapping

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from airflow_paimon.format.errors import MergeClauseError, PaimonError

__all__ = ["NotTranslatable", "ColumnSide", "to_duckdb", "quote"]


class NotTranslatable(PaimonError):
    """A clause the in-process engine cannot evaluate exactly as Spark would: the MERGE must run on Spark."""


_EXACT: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren,
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Is,
    exp.In, exp.Between, exp.Case, exp.If, exp.Coalesce, exp.Tuple,
    exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Abs,
    exp.Cast, exp.DataType, exp.DataTypeParam,
    exp.Upper, exp.Lower, exp.Length, exp.Substring, exp.Trim, exp.Concat, exp.DPipe, exp.Like,
    exp.TsOrDsAdd, exp.TsOrDsToDate, exp.DateDiff, exp.Year, exp.Month, exp.Day, exp.Var,
)

# Cast targets whose conversions agree between Spark (ANSI) and DuckDB for the inputs allowed below.
_CAST_TYPES = {
    exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT, exp.DataType.Type.BIGINT,
    exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE, exp.DataType.Type.DECIMAL, exp.DataType.Type.BOOLEAN,
    exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ,
    exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR,
}
_STRING_TYPES = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR}


class ColumnSide:
    """The columns one side of the join (``s`` or ``t``) offers a clause: name (any case) -> joined column."""

    def __init__(self, alias: str, columns: Mapping[str, str], types: Mapping[str, pa.DataType]):
        self.alias = alias
        self.by_lower = {name.lower(): (name, joined) for name, joined in columns.items()}
        self.types = types

    def find(self, name: str) -> tuple[str, str] | None:
        return self.by_lower.get(name.lower())


def quote(name: str) -> str:
    """A DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def _text_of_exact_value(node: exp.Expression, type_of: Callable[[exp.Column], pa.DataType | None]) -> bool:
    """Whether casting `node` to a string gives the same text in both engines (integers, strings, dates)."""
    if isinstance(node, exp.Literal):
        return True
    if isinstance(node, exp.Column):
        t = type_of(node)
        return t is not None and (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                                  or pa.types.is_date(t))
    return False


def to_duckdb(sql: str, sides: list[ColumnSide], label: str, what: str) -> str:
    """`sql` (Spark SQL) as DuckDB SQL over the joined columns of `sides`.

    MergeClauseError for SQL that does not parse or names a column no side has (as Spark refuses it);
    NotTranslatable for SQL that parses but may not mean the same in DuckDB."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except ParseError as e:
        raise MergeClauseError(f"{label}: the {what} {sql!r} is not valid Spark SQL: {str(e).splitlines()[0]}") \
            from None
    for node in tree.walk():
        if not isinstance(node, _EXACT):
            raise NotTranslatable(
                f"{label}: the {what} {sql!r} uses {node.sql(dialect='spark')!r} ({type(node).__name__}), which "
                "the in-process engine does not evaluate exactly as Spark does; run this MERGE on Spark "
                "(engine='spark', or 'auto' chooses it)")
    by_alias = {side.alias: side for side in sides}

    def resolve(col: exp.Column) -> tuple[ColumnSide, str, str]:
        qualifier = col.table
        name = col.name
        if qualifier:
            side = by_alias.get(qualifier.lower())
            if side is None:
                raise MergeClauseError(
                    f"{label}: the {what} {sql!r} refers to {qualifier}.{name}, but only "
                    f"{' and '.join(sorted(by_alias))} can be referred to here")
            found = side.find(name)
            if found is None:
                raise MergeClauseError(
                    f"{label}: the {what} {sql!r} refers to {qualifier}.{name}, which is not a column of "
                    f"{'the source' if side.alias == 's' else 'the target'} (columns: "
                    f"{[n for n, _ in side.by_lower.values()]})")
            return side, found[0], found[1]
        hits = [(side, side.find(name)) for side in sides if side.find(name) is not None]
        if not hits:
            raise MergeClauseError(f"{label}: the {what} {sql!r} refers to {name!r}, which is not a column of "
                                   f"{' or '.join('the source' if s.alias == 's' else 'the target' for s in sides)}")
        if len(hits) > 1:
            raise MergeClauseError(f"{label}: the {what} {sql!r} refers to {name!r}, which both the source and the "
                                   "target have; qualify it (s.{0} or t.{0})".format(name))
        side, found = hits[0]
        assert found is not None
        return side, found[0], found[1]

    def type_of(col: exp.Column) -> pa.DataType | None:
        side, name, _ = resolve(col)
        return side.types.get(name)

    for cast in list(tree.find_all(exp.Cast)):
        to = cast.to
        if to.this not in _CAST_TYPES:
            raise NotTranslatable(
                f"{label}: the {what} {sql!r} casts to {to.sql(dialect='spark')}, which the in-process engine does "
                "not convert exactly as Spark does; run this MERGE on Spark")
        if to.this in _STRING_TYPES and not _text_of_exact_value(cast.this, type_of):
            raise NotTranslatable(
                f"{label}: the {what} {sql!r} casts {cast.this.sql(dialect='spark')} to a string, whose text may "
                "differ between Spark and the in-process engine; run this MERGE on Spark")

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Cast):
            to = node.to
            if to.this in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPLTZ,
                           exp.DataType.Type.TIMESTAMPTZ):
                # Spark's TIMESTAMP is an instant shown in the session time zone; the in-process engine works in
                # UTC with timestamps without a time zone (Paimon's TIMESTAMP), which compare and convert alike.
                to = exp.DataType.build("TIMESTAMP")
            # Spark's ANSI casts fail on a value that does not convert, as DuckDB's CAST does (TRY_CAST: NULL).
            return exp.Cast(this=node.this, to=to)
        return node

    def rename(node: exp.Expression) -> exp.Expression:
        return exp.column(resolve(node)[2], quoted=True) if isinstance(node, exp.Column) else node

    tree = tree.transform(rename).transform(rewrite)
    return tree.sql(dialect="duckdb")
