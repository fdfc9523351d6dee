"""A MERGE whose source is another table's change feed: deletes delete, the rest upserts, the last change of a key in
commit order wins; a consumer advances only after the commit landed, and a retry applies a range exactly once.

The driver-path tests hand `run_merge` a session factory that fails: a reduced feed that small never needs Spark.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_paimon.format.consumers import ConsumerNotFoundError
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.spark.merge.feed import FEED_PROPERTY, open_feed, reduce_feed

pytestmark = pytest.mark.spark  # the merge application; no Spark job runs but one, which asks for it

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.float64())])


class SparkWanted(Exception):
    """Raised by the session factory: the merge asked for Spark."""


def no_spark():
    raise SparkWanted()


def make_tables(cat, source_producer="lookup", target_producer="lookup"):
    src = cat.create_table("db.src", SCHEMA, primary_keys=["id"],
                           options={"bucket": "2", "changelog-producer": source_producer})
    dst = cat.create_table("db.dst", SCHEMA, primary_keys=["id"],
                           options={"bucket": "2", "changelog-producer": target_producer})
    return src, dst


def rows(ids, names, amounts):
    return pa.table({"id": ids, "name": names, "amount": amounts}, schema=SCHEMA)


def content(table):
    return sorted(table.read().to_pylist(), key=lambda r: r["id"])


def merge(cat, source, spark=no_spark, **extra):
    spec = {"target": "db.dst", "warehouse": cat.warehouse, "source": source, "commit_user": "airflow:sync.merge"}
    spec.update(extra)
    return run_merge(spark, spec)


def history(src):
    """Commits of the source: inserts, an update, a delete, a key changed three times, a key deleted and back."""
    src.write(rows([1, 2, 3, 4], ["a", "b", "c", "d"], [1.0, 2.0, 3.0, 4.0]))
    src.write(rows([1], ["a2"], [10.0]))
    src.delete(pa.table({"id": [2]}))
    src.write(rows([3], ["c2"], [30.0]))
    src.write(rows([3, 5], ["c3", "e"], [31.0, 5.0]))
    src.delete(pa.table({"id": [4]}))
    src.write(rows([4], ["d2"], [40.0]))


@pytest.mark.parametrize("source_producer", ["lookup", "none"])
def test_a_range_of_the_feed_mirrors_the_source_in_the_driver(warehouse, source_producer):
    src, dst = make_tables(warehouse, source_producer)
    history(src)
    result = merge(warehouse, {"change_feed": "db.src", "start": 0})
    assert result["status"] == "committed" and result["engine"] == "driver"
    end = src.latest_snapshot().id
    assert result["source"] == {"kind": "change_feed", "table": "db.src", "start": 0, "end": end,
                                "mode": "auto", "consumer_id": None}
    assert content(dst) == content(src)
    assert result["rows"] == {"upserted": 4, "deleted": 1}   # 1, 3, 4, 5 upserted; 2 deleted
    # the lookup target's own changelog is the exact change of this one MERGE
    feed = dst.changes(0, dst.latest_snapshot().id).read_all()
    assert sorted(zip(feed["_change_type"].to_pylist(), feed["id"].to_pylist())) == [
        ("insert", 1), ("insert", 3), ("insert", 4), ("insert", 5)]
    props = json.loads(dst.latest_snapshot().properties[FEED_PROPERTY])
    assert (props["start"], props["end"]) == (0, end)


def test_the_last_change_in_commit_order_wins_across_ranges(warehouse):
    src, dst = make_tables(warehouse)
    src.write(rows([1, 2], ["a", "b"], [1.0, 2.0]))
    src.create_tag("t1")
    merge(warehouse, {"change_feed": "db.src", "end": "t1", "start": 0})
    src.write(rows([1], ["a2"], [2.0]))
    src.delete(pa.table({"id": [1]}))
    src.write(rows([1, 2], ["a3", "b2"], [3.0, 4.0]))
    src.delete(pa.table({"id": [2]}))
    src.create_tag("t2")
    result = merge(warehouse, {"change_feed": "db.src", "start": "t1", "end": "t2"})
    assert result["rows"] == {"upserted": 1, "deleted": 1}
    assert content(dst) == content(src) == [{"id": 1, "name": "a3", "amount": 3.0}]
    again = merge(warehouse, {"change_feed": "db.src", "start": "t1", "end": "t2"})
    assert again["status"] == "already_committed" and again["snapshot_id"] == result["snapshot_id"]


def test_the_reduction_gives_the_same_rows_however_often_it_runs(warehouse):
    src, _ = make_tables(warehouse, source_producer="input")
    history(src)
    feed = open_feed({"change_feed": "db.src", "start": 0}, warehouse)
    once = reduce_feed(feed, ["id"])
    assert reduce_feed(feed, ["id"], reduce_rows=1).to_pylist() == once.to_pylist()
    assert sorted((r["id"], r["name"], r["_change"]) for r in once.to_pylist()) == [
        (1, "a2", "+U"), (2, None, "-D"), (3, "c3", "+U"), (4, "d2", "+U"), (5, "e", "+U")]


def test_a_consumer_advances_after_the_commit_and_a_second_run_reads_only_what_is_new(warehouse):
    src, dst = make_tables(warehouse, source_producer="input")
    src.write(rows([1, 2], ["a", "b"], [1.0, 2.0]))
    src.consumers.create("sync", 1)
    first = merge(warehouse, {"change_feed": "db.src", "consumer_id": "sync"})
    assert first["status"] == "committed" and src.consumers.get("sync") == 2
    nothing = merge(warehouse, {"change_feed": "db.src", "consumer_id": "sync"})
    assert nothing["status"] == "no_changes" and src.consumers.get("sync") == 2
    src.delete(pa.table({"id": [1]}))
    src.write(rows([3], ["c"], [3.0]))
    second = merge(warehouse, {"change_feed": "db.src", "consumer_id": "sync"})
    assert second["rows"] == {"upserted": 1, "deleted": 1} and src.consumers.get("sync") == 4
    assert content(dst) == content(src)


def test_bad_change_feed_sources_change_nothing(warehouse):
    src, dst = make_tables(warehouse)
    src.write(rows([1], ["a"], [1.0]))
    dst.write(rows([9], ["z"], [9.0]))
    before = dst.latest_snapshot().id
    with pytest.raises(ConsumerNotFoundError, match="consumer 'nobody' does not exist on db.src"):
        merge(warehouse, {"change_feed": "db.src", "consumer_id": "nobody"})
    with pytest.raises(InvalidOptionError, match="exactly one of start"):
        merge(warehouse, {"change_feed": "db.src", "start": 0, "consumer_id": "x"})
    with pytest.raises(InvalidOptionError, match="unknown change-feed key"):
        merge(warehouse, {"change_feed": "db.src", "start": 0, "stop": 1})
    with pytest.raises(InvalidOptionError, match="is after its end"):
        merge(warehouse, {"change_feed": "db.src", "start": 1, "end": 0})
    assert dst.latest_snapshot().id == before and content(dst) == [{"id": 9, "name": "z", "amount": 9.0}]


def test_a_feed_too_big_for_the_driver_merges_on_spark_with_the_targets_changelog(spark, warehouse):
    src, dst = make_tables(warehouse)
    history(src)
    dst.write(rows([2, 3, 7], ["old", "old", "keep"], [0.0, 0.0, 7.0]))
    before = dst.latest_snapshot().id
    result = merge(warehouse, {"change_feed": "db.src", "start": 0}, spark=spark, driver_bytes=0)
    assert result["status"] == "committed" and result["engine"] == "spark"
    assert content(dst) == content(src) + [{"id": 7, "name": "keep", "amount": 7.0}]
    feed = dst.changes(before, dst.latest_snapshot().id).read_all()
    assert sorted(zip(feed["id"].to_pylist(), feed["_change_type"].to_pylist())) == [
        (1, "insert"), (2, "delete"), (3, "update_postimage"), (3, "update_preimage"), (4, "insert"),
        (5, "insert")]


def test_a_merge_that_reads_no_change_is_settled_without_the_application(warehouse):
    """`merge_settled_feed` (what the operator asks the worker before submitting the application) gives the
    application's own result where the merge reads no change, changes what the application would change (a
    consumer moved past what the found commit applied), and leaves every other merge to the application."""
    from airflow_paimon.merge import MergeClauseError
    from airflow_paimon.spark.merge import MergeSpec
    from airflow_paimon.spark.merge.feed import merge_settled_feed

    src, dst = make_tables(warehouse, source_producer="input")
    src.write(rows([1, 2], ["a", "b"], [1.0, 2.0]))
    src.consumers.create("sync", 1)
    source = {"change_feed": "db.src", "consumer_id": "sync"}

    def settled(**extra):
        return merge_settled_feed(MergeSpec.from_dict({"target": "db.dst", "warehouse": warehouse.warehouse,
                                                       "source": source, "commit_user": "airflow:sync.merge",
                                                       **extra}))

    assert settled() is None and src.consumers.get("sync") == 1   # a range to read: the application's
    first = merge(warehouse, source)
    snapshots = len(dst.snapshots())
    # Nothing new for the consumer: the application's `no_changes`, on the target's latest snapshot.
    empty = settled()
    applied = merge(warehouse, source)
    assert empty["status"] == applied["status"] == "no_changes"
    assert empty["snapshot_id"] == applied["snapshot_id"] == first["snapshot_id"]
    assert empty["source"] == applied["source"] and empty["commit_identifier"] == applied["commit_identifier"]
    # The consumer moved back, as by a kill between the commit and its advance: the commit is found and the
    # consumer moved past what it applied again.
    src.consumers.reset("sync", 1)
    found = settled()
    assert (found["status"], found["snapshot_id"]) == ("already_committed", first["snapshot_id"])
    assert found["commit_identifier"] == first["commit_identifier"] and src.consumers.get("sync") == 2
    assert len(dst.snapshots()) == snapshots
    # Bad input fails as in the application, also where nothing is to be read; a re-application is refused there.
    with pytest.raises(MergeClauseError):
        settled(clauses=[{"when": "matched", "action": "explode"}])
    with pytest.raises(MergeClauseError):
        merge(warehouse, source, clauses=[{"when": "matched", "action": "explode"}])
    assert settled(reapply=True) is None
    src.write(rows([3], ["c"], [3.0]))
    assert settled() is None and src.consumers.get("sync") == 2
    assert len(dst.snapshots()) == snapshots
