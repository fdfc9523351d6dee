"""MERGE clauses: plain, JSON-serialisable descriptions of ``WHEN ... THEN ...`` and their validation.

Build clauses with the helpers and hand them to ``MergeIncrementalOperator`` (or the merge Spark application)::

    from airflow_paimon.merge import matched_update, matched_delete, not_matched_insert

    clauses = [
        matched_delete(condition="s.op = 'D'"),
        matched_update(set="*", condition="s.updated_at > t.updated_at"),
        not_matched_insert(values="*", condition="s.op <> 'D'"),
    ]

Conditions and expressions are Spark SQL. The target is aliased ``t`` and the source ``s``; qualify column
references with them (``t.amount``, ``s.amount``). For each source/target row pair the first clause of the
matching kind whose condition holds applies, as in Spark's and Paimon's ``MERGE INTO``:

* ``matched_update(set="*" | {col: expr}, condition=None)`` -- WHEN MATCHED [AND cond] THEN UPDATE SET ...
* ``matched_delete(condition=None)`` -- WHEN MATCHED [AND cond] THEN DELETE
* ``not_matched_insert(values="*" | {col: expr}, condition=None)`` -- WHEN NOT MATCHED [AND cond] THEN INSERT
* ``not_matched_by_source_update(set={col: expr}, condition=None)`` -- WHEN NOT MATCHED BY SOURCE ... UPDATE
* ``not_matched_by_source_delete(condition=None)`` -- WHEN NOT MATCHED BY SOURCE [AND cond] THEN DELETE

The default clauses are a plain upsert: ``[matched_update(set="*"), not_matched_insert(values="*")]``.

This module has no Airflow and no Spark imports: DAG files, the operator and the Spark application share it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from airflow_paimon.format.errors import MergeClauseError

__all__ = [
    "MATCHED", "NOT_MATCHED", "NOT_MATCHED_BY_SOURCE",
    "MergeClause", "MergeClauseError",
    "matched_update", "matched_delete", "not_matched_insert",
    "not_matched_by_source_update", "not_matched_by_source_delete",
    "default_clauses", "parse_clauses", "validate_clauses", "is_plain_upsert", "referenced_columns",
    "normalize_on", "check_clause_order", "target_columns_needed", "resolve_column", "SOURCE_FORMATS", "FEED_KEY",
]

SOURCE_FORMATS = ("parquet", "csv", "json", "orc", "avro", "paimon", "sql")
"""What ``source_format`` may name (the merge application's readers)."""

FEED_KEY = "change_feed"
"""The key of a source mapping that names another table whose change feed is merged."""

MATCHED = "matched"
NOT_MATCHED = "not_matched"
NOT_MATCHED_BY_SOURCE = "not_matched_by_source"

_ACTIONS = {
    MATCHED: ("update", "delete"),
    NOT_MATCHED: ("insert",),
    NOT_MATCHED_BY_SOURCE: ("update", "delete"),
}
_SQL_WHEN = {MATCHED: "WHEN MATCHED", NOT_MATCHED: "WHEN NOT MATCHED",
             NOT_MATCHED_BY_SOURCE: "WHEN NOT MATCHED BY SOURCE"}


@dataclass(frozen=True)
class MergeClause:
    """One ``WHEN <when> [AND condition] THEN <action>`` clause.

    ``assignments`` is ``"*"`` (every target column from the source column of the same name) or a mapping
    target column -> Spark SQL expression; it is ``None`` for deletes.
    """

    when: str
    action: str
    condition: str | None = None
    assignments: str | Mapping[str, str] | None = field(default=None)

    # ---- (de)serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"when": self.when, "action": self.action}
        if self.condition is not None:
            out["condition"] = self.condition
        if self.assignments is not None:
            key = "values" if self.action == "insert" else "set"
            out[key] = self.assignments if isinstance(self.assignments, str) else dict(self.assignments)
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "MergeClause":
        if isinstance(doc, MergeClause):
            return doc
        if not isinstance(doc, Mapping):
            raise MergeClauseError(f"a clause must be a mapping or a MergeClause, got {type(doc).__name__}: {doc!r}")
        unknown = set(doc) - {"when", "action", "condition", "set", "values", "assignments"}
        if unknown:
            raise MergeClauseError(f"clause {dict(doc)!r} has unknown keys {sorted(unknown)}")
        when = str(doc.get("when", "")).strip().lower().replace(" ", "_")
        action = str(doc.get("action", "")).strip().lower()
        assignments = doc.get("assignments", doc.get("set", doc.get("values")))
        condition = doc.get("condition")
        clause = cls(when, action, condition if condition not in ("",) else None,
                     dict(assignments) if isinstance(assignments, Mapping) else assignments)
        clause.check_shape()
        return clause

    # ---- shape ------------------------------------------------------------------------------------
    def describe(self) -> str:
        text = f"{_SQL_WHEN.get(self.when, self.when)}"
        if self.condition:
            text += f" AND {self.condition}"
        text += f" THEN {self.action.upper()}"
        if self.assignments is not None:
            text += " *" if self.assignments == "*" else " (" + ", ".join(self.assignments) + ")"
        return text

    def check_shape(self) -> None:
        if self.when not in _ACTIONS:
            raise MergeClauseError(
                f"clause when={self.when!r} is not one of {sorted(_ACTIONS)}")
        if self.action not in _ACTIONS[self.when]:
            raise MergeClauseError(
                f"{_SQL_WHEN[self.when]} cannot {self.action!r}; allowed: {list(_ACTIONS[self.when])}")
        if self.condition is not None and (not isinstance(self.condition, str) or not self.condition.strip()):
            raise MergeClauseError(f"{self.describe()}: the condition must be a non-empty Spark SQL string")
        if self.action == "delete":
            if self.assignments is not None:
                raise MergeClauseError(f"{self.describe()}: a DELETE clause takes no assignments")
            return
        a = self.assignments
        if a is None:
            raise MergeClauseError(f"{_SQL_WHEN[self.when]} THEN {self.action.upper()}: give set='*' or a mapping")
        if isinstance(a, str):
            if a.strip() != "*":
                raise MergeClauseError(
                    f"{self.describe()}: assignments must be '*' or a mapping column -> expression, got {a!r}")
            if self.when == NOT_MATCHED_BY_SOURCE:
                raise MergeClauseError(
                    "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET * is not possible: there is no source row; "
                    "give a mapping column -> expression over t")
            return
        if not isinstance(a, Mapping) or not a:
            raise MergeClauseError(f"{self.describe()}: assignments must be '*' or a non-empty mapping")
        for col, expr in a.items():
            if not isinstance(col, str) or not col:
                raise MergeClauseError(f"{self.describe()}: column names must be non-empty strings, got {col!r}")
            if not isinstance(expr, str) or not expr.strip():
                raise MergeClauseError(
                    f"{self.describe()}: the expression for {col!r} must be a non-empty Spark SQL string")

    @property
    def is_star(self) -> bool:
        return isinstance(self.assignments, str) and self.assignments.strip() == "*"


# ---- helpers users call -------------------------------------------------------------------------------

def matched_update(set: str | Mapping[str, str] = "*", condition: str | None = None) -> MergeClause:  # noqa: A002
    """WHEN MATCHED [AND condition] THEN UPDATE SET * | SET col = expr, ..."""
    c = MergeClause(MATCHED, "update", condition, dict(set) if isinstance(set, Mapping) else set)
    c.check_shape()
    return c


def matched_delete(condition: str | None = None) -> MergeClause:
    """WHEN MATCHED [AND condition] THEN DELETE"""
    c = MergeClause(MATCHED, "delete", condition)
    c.check_shape()
    return c


def not_matched_insert(values: str | Mapping[str, str] = "*", condition: str | None = None) -> MergeClause:
    """WHEN NOT MATCHED [AND condition] THEN INSERT * | INSERT (col, ...) VALUES (expr, ...)"""
    c = MergeClause(NOT_MATCHED, "insert", condition, dict(values) if isinstance(values, Mapping) else values)
    c.check_shape()
    return c


def not_matched_by_source_update(set: Mapping[str, str], condition: str | None = None) -> MergeClause:  # noqa: A002
    """WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET col = expr (expressions over t only)."""
    c = MergeClause(NOT_MATCHED_BY_SOURCE, "update", condition, dict(set) if isinstance(set, Mapping) else set)
    c.check_shape()
    return c


def not_matched_by_source_delete(condition: str | None = None) -> MergeClause:
    """WHEN NOT MATCHED BY SOURCE [AND condition] THEN DELETE"""
    c = MergeClause(NOT_MATCHED_BY_SOURCE, "delete", condition)
    c.check_shape()
    return c


def default_clauses() -> list[MergeClause]:
    """The plain upsert: update every matched row from the source, insert every unmatched source row."""
    return [matched_update(set="*"), not_matched_insert(values="*")]


def parse_clauses(clauses: Any) -> list[MergeClause]:
    """Clauses from MergeClause objects, their dicts, or a JSON string of a list of dicts; None -> default."""
    if clauses is None:
        return default_clauses()
    if isinstance(clauses, str):
        text = clauses.strip()
        if not text:
            return default_clauses()
        try:
            clauses = json.loads(text)
        except json.JSONDecodeError as e:
            raise MergeClauseError(f"clauses is not valid JSON ({e}): {clauses[:200]!r}") from None
    if isinstance(clauses, (MergeClause, Mapping)):
        clauses = [clauses]
    if not isinstance(clauses, Iterable):
        raise MergeClauseError(f"clauses must be a list, got {type(clauses).__name__}")
    out = [MergeClause.from_dict(c) for c in clauses]
    if not out:
        raise MergeClauseError("at least one clause is needed (None means the default upsert)")
    return out


def is_plain_upsert(clauses: Sequence[MergeClause]) -> bool:
    """True for exactly [matched_update(set='*'), not_matched_insert(values='*')] without conditions."""
    if len(clauses) != 2:
        return False
    kinds = {(c.when, c.action) for c in clauses}
    return kinds == {(MATCHED, "update"), (NOT_MATCHED, "insert")} and all(
        c.condition is None and c.is_star for c in clauses)


# ---- column references --------------------------------------------------------------------------------

_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_REF = re.compile(r"(?<![\w.`])(?:([A-Za-z_]\w*)\s*\.\s*)?(`(?:[^`]|``)+`|[A-Za-z_]\w*)")


def referenced_columns(expression: str | None, alias: str, columns: Iterable[str],
                       include_unqualified: bool = True) -> set[str]:
    """Columns of `columns` that `expression` may reference through `alias` (``t`` or ``s``).

    Conservative: an unqualified name that equals a column counts too (reading a column too many is only
    slower; one too few would be wrong). Names are matched case-insensitively, like Spark does.
    """
    if not expression:
        return set()
    by_lower = {c.lower(): c for c in columns}
    text = _STRING_LITERAL.sub(" '' ", expression)
    found: set[str] = set()
    for m in _REF.finditer(text):
        qualifier, name = m.group(1), m.group(2)
        if name.startswith("`"):
            name = name[1:-1].replace("``", "`")
        col = by_lower.get(name.lower())
        if col is None:
            continue
        if qualifier is None:
            if include_unqualified:
                found.add(col)
        elif qualifier.lower() == alias.lower():
            found.add(col)
    return found


def _qualifiers(expression: str | None) -> set[str]:
    if not expression:
        return set()
    text = _STRING_LITERAL.sub(" '' ", expression)
    return {m.group(1).lower() for m in _REF.finditer(text) if m.group(1)}


def is_identity(expression: str, column: str) -> bool:
    """`s.col`, `t.col` or `col` (optionally back-quoted), i.e. the key itself."""
    text = expression.strip()
    m = re.fullmatch(r"(?:([A-Za-z_]\w*)\s*\.\s*)?(`(?:[^`]|``)+`|[A-Za-z_]\w*)", text)
    if not m:
        return False
    name = m.group(2)
    if name.startswith("`"):
        name = name[1:-1].replace("``", "`")
    return name.lower() == column.lower() and (m.group(1) is None or m.group(1).lower() in ("s", "t"))


def normalize_on(on: Any, primary_keys: Sequence[str], target_columns: Sequence[str]) -> list[str]:
    """The ``on`` columns as a list (None -> the primary key); every primary-key column must be in it."""
    if on is None or on == "" or on == []:
        cols = list(primary_keys)
    elif isinstance(on, str):
        cols = [c.strip() for c in on.split(",") if c.strip()]
    else:
        cols = [str(c).strip() for c in on]
    by_lower = {c.lower(): c for c in target_columns}
    out = []
    for c in cols:
        real = by_lower.get(c.lower())
        if real is None:
            raise MergeClauseError(f"on: column {c!r} is not a column of the target {list(target_columns)}")
        if real not in out:
            out.append(real)
    missing = [k for k in primary_keys if k not in out]
    if missing:
        raise MergeClauseError(
            f"on must contain every primary-key column of the target {list(primary_keys)}; missing {missing}. "
            "(A merge into a primary-key table matches rows by their key; put further conditions into the "
            "clauses.)")
    return out


def resolve_column(columns: Sequence[str], name: str) -> str | None:
    """`name` among `columns` as Spark resolves it (exact, else ignoring case); None when absent."""
    if name in columns:
        return name
    low = name.lower()
    return next((c for c in columns if c.lower() == low), None)


def target_columns_needed(names: Sequence[str], primary_keys: Sequence[str],
                          clauses: Sequence[MergeClause], on: Sequence[str], guard_fields: Sequence[str],
                          delete_reads: Sequence[str]) -> list[str]:
    """The target columns (of `names`, in that order) the clauses read: conditions, values, the columns an
    update keeps, and `delete_reads` for a delete (the engines write a deleted row differently, so each says
    what it needs); a plain upsert needs only the keys."""
    need = set(primary_keys) | set(on) | set(guard_fields)
    for c in clauses:
        need |= referenced_columns(c.condition, "t", names, include_unqualified=c.when != NOT_MATCHED)
        if isinstance(c.assignments, Mapping):
            for expr in c.assignments.values():
                need |= referenced_columns(expr, "t", names, include_unqualified=c.when != NOT_MATCHED)
            if c.action == "update":
                assigned = {resolve_column(names, k) for k in c.assignments}
                need |= {n for n in names if n not in assigned}
        if c.action == "delete":
            need |= set(delete_reads)
    return [n for n in names if n in need]


# ---- validation ---------------------------------------------------------------------------------------

def check_clause_order(clauses: Sequence[MergeClause]) -> None:
    """Raise MergeClauseError for a clause that can never apply because an earlier clause of the same kind has
    no condition (it takes every row first). Needs no table, so DAG parsing can run it."""
    if not clauses:
        raise MergeClauseError("at least one clause is needed")
    seen_unconditional: dict[str, int] = {}
    for i, c in enumerate(clauses, start=1):
        c.check_shape()
        if c.when in seen_unconditional:
            j = seen_unconditional[c.when]
            raise MergeClauseError(
                f"clause #{i} ({c.describe()}) can never apply: clause #{j} of the same kind ({_SQL_WHEN[c.when]}) "
                f"has no condition and takes every row first. Only the last {_SQL_WHEN[c.when]} clause may omit "
                "its condition; move it to the end or give it a condition.")
        if c.condition is None:
            seen_unconditional[c.when] = i


def validate_clauses(clauses: Sequence[MergeClause], *, target_columns: Sequence[str],
                     primary_keys: Sequence[str], on: Sequence[str],
                     source_columns: Sequence[str] | None = None) -> None:
    """Raise MergeClauseError, naming the clause, for anything that cannot run as MERGE on this target."""
    check_clause_order(clauses)
    by_lower = {c.lower(): c for c in target_columns}
    source_lower = {c.lower() for c in source_columns} if source_columns is not None else None
    for i, c in enumerate(clauses, start=1):
        label = f"clause #{i} ({c.describe()})"
        # Which side each expression may read.
        exprs = [c.condition] + (list(c.assignments.values()) if isinstance(c.assignments, Mapping) else [])
        quals = set().union(*(_qualifiers(e) for e in exprs))
        if c.when == NOT_MATCHED and "t" in quals:
            raise MergeClauseError(f"{label} refers to t: a NOT MATCHED row has no target row; use s only")
        if c.when == NOT_MATCHED_BY_SOURCE and "s" in quals:
            raise MergeClauseError(f"{label} refers to s: a NOT MATCHED BY SOURCE row has no source row; use t only")
        if isinstance(c.assignments, Mapping):
            for col, expr in c.assignments.items():
                real = by_lower.get(col.lower())
                if real is None:
                    raise MergeClauseError(
                        f"{label} assigns {col!r}, which is not a target column {list(target_columns)}")
                if c.action == "update" and real in primary_keys and not (real in on and is_identity(expr, real)):
                    raise MergeClauseError(
                        f"{label}: Can't update the primary key column {real!r}. A MERGE into a primary-key table "
                        "may not change keys (delete the row and insert the new key instead).")
            if c.action == "insert":
                given = {by_lower[k.lower()] for k in c.assignments}
                missing = [k for k in primary_keys if k not in given]
                if missing:
                    raise MergeClauseError(f"{label} gives no value for the primary-key column(s) {missing}")
        elif c.is_star and source_lower is not None:
            missing = [col for col in target_columns if col.lower() not in source_lower]
            if missing:
                raise MergeClauseError(
                    f"{label} takes every target column from the source, but the source has no column(s) {missing}; "
                    "give the columns explicitly (set={...} / values={...})")
    if source_lower is not None:
        missing_on = [k for k in on if k.lower() not in source_lower]
        if missing_on:
            raise MergeClauseError(f"on: the source has no column(s) {missing_on}")
