"""A deliberately plain MERGE over Python rows: the oracle the Spark merge is checked against.

Each clause is (when, action, condition, assignments) with the condition and assignment values as Python
functions of (s, t) -- the same logic the tests give the Spark merge as Spark SQL.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pyarrow as pa

Row = dict[str, Any]
Cond = Callable[[Row | None, Row | None], bool] | None


def clause(when: str, action: str, cond: Cond = None, assign: Any = None) -> tuple:
    return (when, action, cond, assign)


def older(s: Row, t: Row, seq_fields: Sequence[str], descending: bool = False) -> bool:
    """Whether `s` is an older version than `t` by Paimon's sequence comparator: field by field, a None below
    every value, the values compared the other way round when `descending`."""
    for f in seq_fields:
        a, b = s.get(f), t.get(f)
        if a == b:
            continue
        if a is None or b is None:
            return a is None
        return (a > b) if descending else (a < b)
    return False


def merge_rows(target: Sequence[Row], source: Sequence[Row], on: Sequence[str], clauses: Sequence[tuple],
               columns: Sequence[str], seq_fields: Sequence[str] = (), descending: bool = False) -> list[Row]:
    def key(r: Row) -> tuple:
        return tuple(r[k] for k in on)

    by_key = {key(t): dict(t) for t in target}
    out = dict(by_key)
    matched: set[tuple] = set()

    def fire(when: str, s: Row | None, t: Row | None) -> None:
        for w, action, cond, assign in clauses:
            if w != when:
                continue
            if cond is not None and not cond(s, t):
                continue
            if action == "delete":
                out.pop(key(t), None)
            elif action == "update":
                new = dict(t)
                if assign == "*":
                    new.update({c: s[c] for c in columns})
                else:
                    new.update({c: f(s, t) for c, f in assign.items()})
                out[key(t)] = new
            elif action == "insert":
                if assign == "*":
                    new = {c: s[c] for c in columns}
                else:
                    new = {c: None for c in columns}
                    new.update({c: f(s, None) for c, f in assign.items()})
                out[key(new)] = new
            return

    for s in source:
        t = by_key.get(key(s))
        if t is not None:
            matched.add(key(s))
            if older(s, t, seq_fields, descending):
                continue
            fire("matched", s, t)
        else:
            fire("not_matched", s, None)
    for k, t in by_key.items():
        if k not in matched:
            fire("not_matched_by_source", None, t)
    return list(out.values())


def rows_of(table: pa.Table) -> list[Row]:
    return table.to_pylist()


def canonical(rows: Sequence[Row], keys: Sequence[str]) -> list[Row]:
    return sorted((dict(r) for r in rows), key=lambda r: tuple(str(r[k]) for k in keys))
