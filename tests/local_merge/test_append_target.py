"""MERGE into append tables with deletion vectors, in process: each clause checked against a plain-Python model of
Spark's MERGE semantics on rows without a key (a source row may match several target rows; "not matched" means
no target row anywhere matched it); the changed rows are marked in deletion vectors and no data file is
rewritten; bad input changes nothing; the change feed sees the MERGE as its deletes and inserts."""

from __future__ import annotations

import os
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import DuplicateKeyError, InvalidDataError, MergeClauseError
from airflow_paimon.local_merge.engine import merge_in_process
from airflow_paimon.merge import (
    matched_delete,
    matched_update,
    not_matched_by_source_delete,
    not_matched_by_source_update,
    not_matched_insert,
)

from ..format.upkeep_helpers import tree_digest

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
# Fewer in the quick subset (PAIMON_MODEL_EXAMPLES, as tests/format/test_model.py).
EXAMPLES = min(20, int(os.environ.get("PAIMON_MODEL_EXAMPLES", "20")) * 2)
KINDS = {"unaware": {}, "bucketed": {"bucket": "3", "bucket-key": "id"}}


def table_of(data: list[tuple]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in data], pa.int64()), "p": [r[1] for r in data],
                     "v": pa.array([r[2] for r in data], pa.int64())}, schema=SCHEMA)


def live(t, snapshot_id=None) -> Counter:
    return Counter((r["id"], r["p"], r["v"]) for r in t.read(snapshot_id=snapshot_id).to_pylist())


def data_files(t) -> set[str]:
    return {e.file.file_name for e in t.file_entries(t.latest_snapshot())}


def model(target: Counter, source: list[tuple], clauses: list[tuple]) -> Counter:
    """Spark's MERGE on `on = id`, clauses as (when, action, condition(s, t) or None, value(s, t) or None), the
    first clause of each kind whose condition holds applying."""
    out: Counter = Counter()
    matched_sources = set()
    for row, n in target.items():
        hits = [s for s in source if s[0] == row[0]]
        kind = "matched" if hits else "not_matched_by_source"
        s = hits[0] if hits else None
        if hits:
            matched_sources.add(s)
        for when, action, cond, value in clauses:
            if when == kind and (cond is None or cond(s, row)):
                if action == "update":
                    out[value(s, row)] += n
                break
        else:
            out[row] += n
    for s in source:
        if s in matched_sources:
            continue
        for when, action, cond, value in clauses:
            if when == "not_matched" and (cond is None or cond(s, None)):
                out[s] += 1
                break
    return +out


@pytest.fixture()
def catalog(tmp_path):
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def new_table(catalog, kind: str, rows: list[tuple], name: str = "t"):
    t = catalog.create_table(f"db.{name}", SCHEMA, partition_keys=["p"],
                             options={"deletion-vectors.enabled": "true", **KINDS[kind]})
    t.write(table_of(rows))
    return t


TARGET = [(1, "x", 10), (1, "y", 11), (2, "x", 20), (3, "y", 30), (3, "y", 30), (4, "x", 40), (5, "y", 50)]
SOURCE = [(1, "x", 100), (3, "y", 5), (4, "y", 400), (9, "x", 900), (8, "y", 8)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_clause_kind_agrees_with_the_model_and_rewrites_no_file(catalog, kind):
    t = new_table(catalog, kind, TARGET)
    files = data_files(t)
    clauses = [matched_delete(condition="s.v < t.v"), matched_update(set={"v": "s.v + t.v"}),
               not_matched_insert(condition="s.v > 100"), not_matched_by_source_update(
                   set={"v": "t.v * -1"}, condition="t.p = 'x'"), not_matched_by_source_delete()]
    result = merge_in_process(t, table_of(SOURCE), clauses, on=["id"])
    want = model(Counter(TARGET), SOURCE, [
        ("matched", "delete", lambda s, r: s[2] < r[2], None),
        ("matched", "update", None, lambda s, r: (r[0], r[1], s[2] + r[2])),
        ("not_matched", "insert", lambda s, r: s[2] > 100, None),
        ("not_matched_by_source", "update", lambda s, r: r[1] == "x", lambda s, r: (r[0], r[1], -r[2])),
        ("not_matched_by_source", "delete", None, None)])
    assert live(t) == want
    # id 1 matched twice (partitions x and y), id 3's two equal rows deleted, id 4 updated, id 2 negated, id 5
    # deleted, id 9 inserted (8 not: its condition fails).
    assert result["status"] == "committed" and result["engine"] == "local"
    assert result["rows"] == {"inserted": 1, "updated": 4, "deleted": 3}
    assert files <= data_files(t)   # nothing rewritten: the old files are still live, with vectors
    assert t.latest_snapshot().index_manifest is not None


def test_the_change_feed_gives_the_merge_as_deletes_then_inserts(catalog):
    t = new_table(catalog, "unaware", TARGET)
    before = t.latest_snapshot().id
    merge_in_process(t, table_of([(2, "x", 21), (7, "y", 70)]),
                     [matched_update(set="*"), not_matched_insert()], on="id")
    got = [(r["_change_type"], r["id"], r["p"], r["v"]) for r in t.changes(before, mode="delta").read_all().to_pylist()]
    assert got[0] == ("delete", 2, "x", 20)
    assert sorted(got[1:]) == [("insert", 2, "x", 21), ("insert", 7, "y", 70)]


def test_bad_input_changes_nothing(catalog):
    t = new_table(catalog, "unaware", TARGET)
    before = tree_digest(t.path)
    with pytest.raises(DuplicateKeyError, match="same `on` values"):
        merge_in_process(t, table_of([(1, "x", 1), (1, "y", 2)]), [matched_delete()], on=["id"])
    with pytest.raises(MergeClauseError, match="needs `on`"):
        merge_in_process(t, table_of([(1, "x", 1)]), [matched_delete()])
    assert tree_digest(t.path) == before
    # Source rows whose `on` value is NULL match nothing, so repeating them is no error.
    nulls = pa.table({"id": pa.array([None, None], pa.int64()), "p": ["x", "x"], "v": pa.array([1, 2], pa.int64())})
    merge_in_process(t, nulls, [matched_delete(), not_matched_insert()], on=["id"])
    assert live(t) == Counter(TARGET) + Counter({(None, "x", 1): 1, (None, "x", 2): 1})
    plain = catalog.create_table("db.plain", SCHEMA)
    plain.write(table_of(TARGET))
    before = tree_digest(plain.path)
    with pytest.raises(InvalidDataError, match="needs deletion vectors"):
        merge_in_process(plain, table_of(SOURCE), [matched_delete()], on=["id"])
    assert tree_digest(plain.path) == before


def test_the_commit_is_exactly_once(catalog):
    t = new_table(catalog, "unaware", TARGET)
    clauses = [matched_update(set={"v": "t.v + 1"})]
    first = merge_in_process(t, table_of([(2, "x", 0)]), clauses, on=["id"], commit_user="u", commit_identifier=3)
    again = merge_in_process(t, table_of([(2, "x", 0)]), clauses, on=["id"], commit_user="u", commit_identifier=3)
    assert again["status"] == "already_committed" and again["snapshot_id"] == first["snapshot_id"]
    assert live(t)[(2, "x", 21)] == 1 and live(t)[(2, "x", 20)] == 0


ROW = st.tuples(st.integers(0, 6), st.sampled_from("xy"), st.integers(-5, 5))


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.lists(ROW, max_size=12), more=st.lists(ROW, max_size=6),
       source=st.lists(ROW, max_size=6, unique_by=lambda r: r[0]), compact=st.booleans())
def test_random_merges_agree_with_the_model(tmp_path_factory, kind, target, more, source, compact):
    catalog = Catalog(str(tmp_path_factory.mktemp("m") / "wh"))
    catalog.create_database("db")
    t = new_table(catalog, kind, target)
    if more:
        t.write(table_of(more))
    if compact and t.latest_snapshot() is not None:
        t.maintenance.compact()
    state = live(t)
    merge_in_process(t, table_of(source), [
        matched_update(set={"v": "s.v"}, condition="s.v > t.v"), matched_delete(condition="s.v = t.v"),
        not_matched_insert(), not_matched_by_source_delete(condition="t.v < 0")], on=["id"])
    assert live(t) == model(state, source, [
        ("matched", "update", lambda s, r: s[2] > r[2], lambda s, r: (r[0], r[1], s[2])),
        ("matched", "delete", lambda s, r: s[2] == r[2], None),
        ("not_matched", "insert", None, None),
        ("not_matched_by_source", "delete", lambda s, r: r[2] < 0, None)])
