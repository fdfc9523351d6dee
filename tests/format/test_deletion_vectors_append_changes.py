"""The change feed of an append table with deletion vectors: its deletes and updates rewrite no file, so the feed
reads the positions each commit's vectors gained back from the data files, as `delete` rows of that commit before
its `insert` rows. Checked on examples and against a multiset model: replaying any range's feed onto the rows at
its start gives the rows at its end."""

from __future__ import annotations

import os
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog, SnapshotExpiredError

from .upkeep_helpers import FUTURE

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])
# Fewer in the quick subset (PAIMON_MODEL_EXAMPLES, as tests/format/test_model.py).
EXAMPLES = min(25, int(os.environ.get("PAIMON_MODEL_EXAMPLES", "25")) * 2)
KINDS = {"unaware": {}, "bucketed": {"bucket": "2", "bucket-key": "id"}}


def rows(ids, p, v) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids), "v": [f"{v}{i}" for i in ids]},
                    schema=SCHEMA)


def live(table, snapshot_id=None) -> Counter:
    if snapshot_id == 0:
        return Counter()
    return Counter((r["id"], r["p"], r["v"]) for r in table.read(snapshot_id=snapshot_id).to_pylist())


def feed(table, start, end=None) -> list[tuple]:
    return [(r["_commit_version"], r["_change_type"], r["id"], r["p"], r["v"])
            for r in table.changes(start, end, mode="delta").read_all().to_pylist()]


def replay(state: Counter, changes: list[tuple]) -> Counter:
    out = Counter(state)
    for _, kind, *row in changes:
        if kind == "insert":
            out[tuple(row)] += 1
        else:
            assert kind == "delete"
            assert out[tuple(row)] > 0, f"a delete of a row that was not there: {row}"
            out[tuple(row)] -= 1
    return +out


def new_table(tmp_path, kind: str, name: str = "t"):
    catalog = Catalog(str(tmp_path / "wh"))
    if "db" not in catalog.list_databases():
        catalog.create_database("db")
    return catalog.create_table(f"db.{name}", SCHEMA, partition_keys=["p"],
                                options={"deletion-vectors.enabled": "true", **KINDS[kind]})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_deletes_and_updates_are_delete_rows_of_their_commit_before_its_inserts(tmp_path, kind):
    t = new_table(tmp_path, kind)
    t.write(pa.concat_tables([rows(range(0, 6), "x", "a"), rows(range(100, 104), "y", "a")]))
    appended = t.latest_snapshot().id
    deleted = t.delete(pa.table({"id": pa.array([1, 101, 999], pa.int64())})).id
    updated = t.update(pa.concat_tables([rows([2], "x", "new"), rows([500], "y", "new")]), on=["id"]).id
    got = feed(t, appended)
    assert sorted(got[:2]) == [(deleted, "delete", 1, "x", "a1"), (deleted, "delete", 101, "y", "a101")]
    assert got[2] == (updated, "delete", 2, "x", "a2")
    assert sorted(got[3:]) == [(updated, "insert", 2, "x", "new2"), (updated, "insert", 500, "y", "new500")]
    # A second delete in one file gives only the row it deleted, not the file's earlier ones again.
    again = t.delete(pa.table({"id": pa.array([3], pa.int64())})).id
    assert feed(t, updated) == [(again, "delete", 3, "x", "a3")]
    assert replay(live(t, appended), feed(t, appended)) == live(t)


def test_a_compaction_inside_the_range_adds_no_change(tmp_path):
    t = new_table(tmp_path, "unaware")
    t.write(rows(range(6), "x", "a"))
    start = t.latest_snapshot().id
    t.delete(pa.table({"id": pa.array([0, 4], pa.int64())}))
    t.maintenance.compact()
    assert t.latest_snapshot().commit_kind == "COMPACT"
    # After the compaction folded the vectors in, a delete marks positions in the rewritten file.
    last = t.delete(pa.table({"id": pa.array([5], pa.int64())})).id
    got = feed(t, start)
    assert [(k, i) for _, k, i, _, _ in got] == [("delete", 0), ("delete", 4), ("delete", 5)]
    assert got[-1][0] == last
    assert replay(live(t, start), got) == live(t)


def test_a_range_from_an_expired_snapshot_into_a_vector_change_is_refused(tmp_path):
    t = new_table(tmp_path, "unaware")
    for i in range(3):
        t.write(rows([i], "x", "a"))
    t.delete(pa.table({"id": pa.array([1], pa.int64())}))
    t.write(rows([9], "x", "a"))
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE)   # keeps snapshots 4 and 5
    with pytest.raises(SnapshotExpiredError, match="cannot be told apart"):
        t.changes(3, mode="delta").read_all()
    # From a retained snapshot the answer is complete.
    assert feed(t, 4) == [(5, "insert", 9, "x", "a9")]


OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.lists(st.integers(0, 12), min_size=1, max_size=6), st.sampled_from("xy")),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 12), min_size=1, max_size=4), st.none()),
    st.tuples(st.just("update"), st.lists(st.integers(0, 12), min_size=1, max_size=4, unique=True),
              st.sampled_from("xy")),
    st.tuples(st.just("compact"), st.none(), st.none()),
), min_size=1, max_size=8)


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, data=st.data())
def test_replaying_any_range_of_the_feed_gives_the_rows_at_its_end(tmp_path_factory, kind, ops, data):
    t = new_table(tmp_path_factory.mktemp("model"), kind)
    for n, (op, ids, p) in enumerate(ops):
        if op == "write":
            t.write(rows(ids, p, f"w{n}-"))
        elif op == "delete":
            t.delete(pa.table({"id": pa.array(ids, pa.int64())}))
        elif op == "update":
            t.update(rows(ids, p, f"u{n}-"), on=["id"])
        elif t.latest_snapshot() is not None:
            t.maintenance.compact()
    latest = t.latest_snapshot()
    if latest is None:
        return
    end = data.draw(st.integers(0, latest.id), label="end")
    start = data.draw(st.integers(0, end), label="start")
    assert replay(live(t, start), feed(t, start, end) if end > start else []) == live(t, end)


def test_expiry_keeps_what_a_consumers_feed_compares_its_first_snapshot_with(tmp_path):
    t = new_table(tmp_path, "unaware")
    for i in range(3):
        t.write(rows([i], "x", "a"))
    t.consumers.create("reader", 3)                      # read up to snapshot 2
    t.delete(pa.table({"id": pa.array([1], pa.int64())}))   # 4
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert t.snapshot_manager.earliest_id() == 2          # the snapshot before the consumer's position stays
    got = [(r["_change_type"], r["id"]) for r in t.changes(consumer_id="reader", mode="delta").read_all().to_pylist()]
    assert got == [("insert", 2), ("delete", 1)]
