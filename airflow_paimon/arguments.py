"""The rules for the arguments of the provider's operators and sensors, applied twice with the same code.

A literal argument is checked when the operator is built, so that a mistake such as ``time_retained='7 dayz'``
shows up as a DAG import error in Airflow's DAG processor instead of failing a run days later. A templated
argument (``"{{ params.days }}"``) can only be checked once rendered: the operators check it again after
rendering, before ``execute``, with the same functions.

Each parser takes the value and the argument's name and returns the parsed value or raises
:class:`ArgumentError` (the format library's ``InvalidValueError``), whose message names the argument, says
what is wrong and what is expected. Times, durations, counts, booleans and tag names are read by
:mod:`airflow_paimon.format.values`, as the library, the command line and the Spark applications read them,
so an argument is refused here exactly when the library would refuse it later.

No Airflow imports: the command line uses the same rules.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from airflow_paimon.format import values
from airflow_paimon.format.catalog import split_identifier
from airflow_paimon.format.errors import InvalidValueError, PaimonError
from airflow_paimon.format.period_values import parse_timezone

__all__ = [
    "ArgumentError",
    "duration",
    "duration_or_time",
    "flag",
    "is_template",
    "merge_clauses",
    "merge_on",
    "one_of",
    "point_in_time",
    "sql_condition",
    "table_identifier",
    "tag_name",
    "timezone",
    "whole_number",
]

_TEMPLATE = re.compile(r"\{\{|\{%")

# IANA's geographic areas: a zone outside them (``US/Pacific``, ``Japan``, ``EST5EDT``) is one of the
# "backward" compatibility names, which distributions ship only in an extra package (Debian's and Ubuntu's
# tzdata-legacy), so a DAG using one parses on one machine and fails on the next.
_IANA_AREAS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian",
               "Pacific", "Etc")


ArgumentError = InvalidValueError
"""An operator or sensor argument that cannot work; the message names the argument."""


def is_template(value: Any) -> bool:
    """True for a string holding Jinja markup: it is checked once rendered, at run time."""
    return isinstance(value, str) and _TEMPLATE.search(value) is not None


def _fail(name: str, message: str) -> ArgumentError:
    return ArgumentError(f"{name}: {message}")


def table_identifier(value: Any, name: str = "table") -> str:
    """``database.table``, as the catalog accepts it."""
    if not isinstance(value, str):
        raise _fail(name, f"expected 'database.table', not {type(value).__name__} {value!r}")
    try:
        split_identifier(value.strip())
    except PaimonError:
        if "." not in value:
            raise _fail(name, f"{value!r} names no database: write it as 'database.table' "
                              f"(e.g. 'default.{value.strip()}')") from None
        raise _fail(name, f"{value!r} is not 'database.table' (letters, digits, '_' and '-' on each side of "
                          "one dot)") from None
    return value.strip()


def tag_name(value: Any, name: str = "tag_name") -> str:
    """A name Paimon accepts for a new tag: not purely numeric (it would read as a snapshot id), no path parts."""
    return values.tag_name(value, name)


def duration(value: Any, name: str, *, positive: bool = False) -> dt.timedelta:
    """A ``timedelta`` or a Paimon duration string (``'7d'``, ``'12 h'``, ``'30 min'``), never negative."""
    return values.duration(value, name, positive=positive)


def point_in_time(value: Any, name: str) -> dt.datetime:
    """A ``datetime``, a date, an ISO 8601 string or epoch milliseconds (no zone: UTC), as an aware datetime."""
    return values.instant(value, name)


def duration_or_time(value: Any, name: str) -> dt.timedelta | dt.datetime:
    """A duration before now (``timedelta``, ``'7d'``) or a point in time (``datetime``, ISO 8601)."""
    return values.age_or_instant(value, name)


def whole_number(value: Any, name: str, *, minimum: int | None = None) -> int:
    """An ``int`` (or, once rendered, a string of digits) at or above ``minimum``."""
    return values.count(value, name, minimum=minimum)


def flag(value: Any, name: str, *, rendered: bool = False) -> bool:
    """``True`` or ``False``. A string is accepted only once rendered from a template (``'True'``, ``'false'``,
    ``'yes'``...): as a literal, ``'false'`` is a true value in Python, the classic mistake this refuses."""
    if isinstance(value, str) and not rendered:
        raise _fail(name, f"expected True or False, not the string {value!r}")
    if not isinstance(value, (bool, str)):
        raise _fail(name, f"expected True or False, not {type(value).__name__} {value!r}")
    return values.boolean(value, name)


def one_of(value: Any, name: str, choices: Iterable[str]) -> str:
    """One of ``choices``, exactly as written there (the operators compare the value as given)."""
    options = tuple(choices)
    if value not in options:
        text = value.strip().lower() if isinstance(value, str) else ""
        close = [c for c in options if text and (c.startswith(text[:3]) or text.startswith(c[:3]))]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _fail(name, f"{value!r} is not one of {', '.join(repr(c) for c in options)}{hint}")
    return value


def timezone(value: Any, name: str = "timezone") -> Any:
    """An IANA ``Area/Location`` name, ``UTC`` or a fixed offset (``'+08:00'``); not a legacy alias."""
    if isinstance(value, str):
        text = value.strip()
        area = text.split("/", 1)[0]
        offset_like = text[:1] in "+-" or text.upper() == "Z" or text.upper().startswith(("UTC", "GMT", "UT"))
        if text and not offset_like and (area not in _IANA_AREAS or "/" not in text):
            canonical = _canonical_zone(text)
            hint = f" ({canonical!r})" if canonical else ""
            raise _fail(name, f"{text!r} is a legacy time zone alias, missing on systems without IANA's "
                              f"'backward' names (e.g. tzdata-legacy): use its Area/Location name{hint}")
    try:
        return parse_timezone(value)
    except ValueError as exc:
        raise _fail(name, str(exc)) from None


def _canonical_zone(alias: str) -> str | None:
    """The Area/Location zone with the same rules as ``alias`` (the tz database stores a link as a copy)."""
    try:
        from importlib import resources

        root = resources.files("tzdata").joinpath("zoneinfo")
        data = root.joinpath(*alias.split("/")).read_bytes()
    except (ImportError, OSError, ValueError):
        return None
    for area in _IANA_AREAS[:-1]:
        folder = root.joinpath(area)
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.is_file() and entry.read_bytes() == data:
                return f"{area}/{entry.name}"
    return None


def sql_condition(value: Any, name: str) -> str:
    """A Spark SQL expression (a clause's condition or an assigned value) that parses in sqlglot's Spark
    dialect: a syntax error is found when the DAG is parsed instead of when the Spark application starts.
    Column names cannot be checked without reading the tables; Spark checks them at run time."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(name, f"expected a Spark SQL condition such as \"s.op = 'D'\", not {value!r}")
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        parsed = sqlglot.parse_one(value, read="spark")
    except (ParseError, TokenError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _fail(name, f"{value!r} is not valid Spark SQL: {first}") from None
    if parsed is None:
        raise _fail(name, f"{value!r} is not a Spark SQL condition")
    return value


_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`")


def merge_on(value: Any, name: str = "on") -> list[str]:
    """The ``on`` columns of a MERGE: a comma-separated string or a list of column names, each once."""
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names:
        raise _fail(name, f"expected column names ('id' or ['id', 'day']), not {value!r}")
    columns: list[str] = []
    for raw in names:
        column = raw.strip() if isinstance(raw, str) else raw
        if not isinstance(column, str) or not _COLUMN.fullmatch(column):
            raise _fail(name, f"{raw!r} in {value!r} is not a column name")
        if column.lower() in (c.lower() for c in columns):
            raise _fail(name, f"{column!r} is given twice in {value!r}")
        columns.append(column)
    return columns


def merge_clauses(value: Any, name: str = "clauses", on: list[str] | None = None) -> list[Any]:
    """MERGE clauses whose shape, order and Spark SQL syntax are right, checked without reading any table:
    a clause after an unconditional one of the same kind, a condition or expression that does not parse, and
    an insert with explicit values that leaves an ``on`` column unset (the row could never match again)."""
    from airflow_paimon.merge import MergeClauseError, check_clause_order, parse_clauses

    try:
        clauses = parse_clauses(value)
        check_clause_order(clauses)
    except MergeClauseError as exc:
        raise _fail(name, str(exc)) from None
    for i, clause in enumerate(clauses, start=1):
        label = f"{name}[{i - 1}] ({clause.describe()})"
        if clause.condition is not None and not is_template(clause.condition):
            sql_condition(clause.condition, f"{label} condition")
        if isinstance(clause.assignments, dict):
            for column, expression in clause.assignments.items():
                if not is_template(expression):
                    sql_condition(expression, f"{label} {column}")
            if clause.action == "insert" and on:
                given = {c.strip("`").lower() for c in clause.assignments}
                unset = [c for c in on if c.strip("`").lower() not in given]
                if unset:
                    raise _fail(name, f"{label} sets no value for the on column(s) {unset}: the inserted rows "
                                      "could never be matched again (a typo in on= or in the insert's values?)")
    return clauses
