"""The clause helpers of airflow_paimon.merge: JSON round trips and validation (no Spark needed)."""

from __future__ import annotations

import json

import pytest

from airflow_paimon.merge import (
    MergeClause,
    MergeClauseError,
    default_clauses,
    is_plain_upsert,
    matched_delete,
    matched_update,
    normalize_on,
    not_matched_by_source_delete,
    not_matched_by_source_update,
    not_matched_insert,
    parse_clauses,
    referenced_columns,
    validate_clauses,
)

COLS = ["id", "dt", "name", "amount", "updated_at"]
PK = ["id", "dt"]


def validate(clauses, on=PK, source=COLS):
    validate_clauses(clauses, target_columns=COLS, primary_keys=PK, on=on, source_columns=source)


def test_clauses_round_trip_through_json():
    clauses = [matched_delete(condition="s.op = 'D'"), matched_update(set={"amount": "s.amount"}),
               not_matched_insert(values="*", condition="s.op <> 'D'"),
               not_matched_by_source_delete("t.amount < 0"), not_matched_by_source_update(set={"name": "'gone'"})]
    text = json.dumps([c.to_dict() for c in clauses])
    assert parse_clauses(text) == clauses
    assert parse_clauses(json.loads(text)) == clauses
    assert [MergeClause.from_dict(c.to_dict()) for c in clauses] == clauses
    assert parse_clauses(None) == default_clauses() and is_plain_upsert(default_clauses())
    assert not is_plain_upsert([matched_update(condition="s.a > t.a"), not_matched_insert()])
    validate(clauses)


@pytest.mark.parametrize("clauses, message", [
    ([matched_update(set={"id": "s.id + 1"})], "Can't update the primary key column 'id'"),
    ([matched_update(set={"dt": "'2026-01-01'"})], "primary key column 'dt'"),
    ([not_matched_by_source_update(set={"id": "t.id * 2"})], "primary key"),
    ([matched_update(), matched_delete(condition="s.a = 1")], "clause #2 .* can never apply"),
    ([not_matched_insert(), not_matched_insert(condition="s.id > 1")], "Only the last WHEN NOT MATCHED"),
    ([not_matched_insert(values={"id": "s.id", "name": "t.name", "dt": "s.dt"})], "refers to t"),
    ([not_matched_by_source_delete(condition="s.id > 1")], "refers to s"),
    ([not_matched_insert(values={"id": "s.id"})], r"no value for the primary-key column\(s\) \['dt'\]"),
    ([matched_update(set={"nope": "1"})], "not a target column"),
    ([], "at least one clause"),
])
def test_invalid_clauses_are_refused_with_a_clear_message(clauses, message):
    with pytest.raises(MergeClauseError, match=message):
        validate(clauses)


def test_shape_errors_and_identity_key_assignments():
    with pytest.raises(MergeClauseError, match="cannot 'insert'"):
        MergeClause.from_dict({"when": "matched", "action": "insert", "values": "*"})
    with pytest.raises(MergeClauseError, match="unknown keys"):
        MergeClause.from_dict({"when": "matched", "action": "delete", "where": "x"})
    with pytest.raises(MergeClauseError, match="no source row"):
        MergeClause.from_dict({"when": "not matched by source", "action": "update", "set": "*"})
    with pytest.raises(MergeClauseError, match="source has no column"):
        validate([matched_update(set="*")], source=["id", "dt", "name"])
    # Assigning a key its own (matched) value is no change of key.
    validate([matched_update(set={"id": "s.id", "dt": "t.dt", "name": "s.name"})])


def test_on_must_cover_the_primary_key():
    assert normalize_on(None, PK, COLS) == PK
    assert normalize_on("ID, dt, name", PK, COLS) == ["id", "dt", "name"]
    with pytest.raises(MergeClauseError, match="missing \\['dt'\\]"):
        normalize_on(["id"], PK, COLS)
    with pytest.raises(MergeClauseError, match="not a column"):
        normalize_on(["id", "dt", "zzz"], PK, COLS)


def test_referenced_columns_is_conservative():
    assert referenced_columns("s.amount > t.amount AND t.`name` = 'amount t.dt'", "t", COLS) == {"amount", "name"}
    assert referenced_columns("coalesce(updated_at, s.dt)", "t", COLS) == {"updated_at"}
    assert referenced_columns("coalesce(updated_at, s.dt)", "t", COLS, include_unqualified=False) == set()
    assert referenced_columns(None, "t", COLS) == set()
