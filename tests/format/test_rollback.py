"""Rollback to a tag, a snapshot id or a point in time: newer snapshots and tags go with the files only they
used; a tag whose snapshot expired is written back as that snapshot."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from airflow_paimon.format import InvalidOptionError, SnapshotNotFoundError, TagNotFoundError

from .upkeep_helpers import (
    FUTURE,
    FailAfter,
    all_files,
    check_all_readable,
    live_data_paths,
    make_table,
    referenced_names,
    rows,
    snapshot_reads,
    store_file,
    tree_digest,
    upsert,
)


@pytest.fixture
def history(warehouse):
    t = make_table(warehouse)
    upsert(t, range(6), 1)          # 1
    upsert(t, range(3, 9), 2)       # 2
    t.tags.create("two")
    upsert(t, range(8, 12), 3)      # 3
    t.maintenance.compact()         # 4
    t.tags.create("four")
    upsert(t, [0], 5)               # 5
    return t


def test_rollback_to_snapshot_id(history):
    t = history
    expected = rows(t.read(snapshot_id=2))
    reads = snapshot_reads(t)
    newer_only = set()
    for sid in (3, 4, 5):
        newer_only |= live_data_paths(t, t.snapshot(sid))
    newer_only -= live_data_paths(t, t.snapshot(1)) | live_data_paths(t, t.snapshot(2))
    result = t.maintenance.rollback(to_snapshot=2)
    assert result.snapshots == [5, 4, 3] and result.tags == ["four"] and result.rolled_back_to == 2
    assert set(result.data_files) == newer_only
    assert t.snapshot_manager.ids() == [1, 2]
    assert [x.name for x in t.tags.list()] == ["two"]
    assert store_file(f"{t.path}/snapshot/LATEST").decode().strip() == "2"
    assert rows(t.read()) == expected
    assert not (newer_only & all_files(t.path))
    check_all_readable(t, {k: v for k, v in reads.items() if k in {("snapshot", 1), ("snapshot", 2),
                                                                    ("tag", "two")}})
    # the table goes on: the next commit is snapshot 3 again, based on 2
    upsert(t, [42], 42)
    assert t.latest_snapshot().id == 3
    assert rows(t.read()) == sorted(expected + [(42, "a", 42)])
    # nothing unreferenced was left behind (Paimon leaves the rolled-back files orphaned)
    data_and_manifests = {p.rsplit("/", 1)[-1] for p in all_files(t.path)
                          if "/bucket-" in p or "/manifest/" in p}
    assert data_and_manifests <= referenced_names(t)


def test_rollback_to_tag_and_to_numeric_string(history):
    t = history
    assert t.maintenance.rollback(to_tag="four").rolled_back_to == 4
    assert t.snapshot_manager.ids() == [1, 2, 3, 4]
    assert t.maintenance.rollback(to_snapshot="3").rolled_back_to == 3
    assert t.tags.names() == ["two"]  # "four" was on snapshot 4 > 3
    check_all_readable(t)


def test_rollback_to_time(history):
    t = history
    s3 = t.snapshot(3)
    when = dt.datetime.fromtimestamp((s3.time_millis + 1) / 1000, dt.timezone.utc)
    assert t.maintenance.rollback(to_time=when).rolled_back_to == 3
    assert t.maintenance.rollback(to_time=when.isoformat()).rolled_back_to == 3  # already there: nothing newer
    assert t.snapshot_manager.ids() == [1, 2, 3]


def test_rollback_to_a_tag_whose_snapshot_expired_restores_it(history):
    t = history
    tag = t.tags.get("two")
    reads = snapshot_reads(t)
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert t.snapshot_manager.ids() == [5]
    result = t.maintenance.rollback(to_tag="two")
    assert result.restored_snapshot == 2 and result.snapshots == [5] and result.tags == ["four"]
    assert t.snapshot_manager.ids() == [2]
    doc = json.loads(store_file(f"{t.path}/snapshot/snapshot-2"))
    assert doc == json.loads(tag.snapshot.to_json())      # the snapshot JSON, without tag fields
    assert "tagCreateTime" not in doc
    assert store_file(f"{t.path}/snapshot/EARLIEST").decode().strip() == "2"
    assert store_file(f"{t.path}/snapshot/LATEST").decode().strip() == "2"
    assert rows(t.read()) == reads[("tag", "two")]
    check_all_readable(t, {("snapshot", 2): reads[("tag", "two")], ("tag", "two"): reads[("tag", "two")]})
    upsert(t, [7], 7)
    assert t.latest_snapshot().id == 3


def test_rollback_by_snapshot_id_held_only_by_a_tag(history):
    t = history
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert t.maintenance.rollback(to_snapshot=4).restored_snapshot == 4
    assert t.snapshot_manager.ids() == [4]


def test_dry_run(history):
    t = history
    before = tree_digest(t.path)
    plan = t.maintenance.rollback(to_tag="two", dry_run=True)
    assert plan.dry_run and plan.snapshots == [5, 4, 3] and plan.data_files
    assert tree_digest(t.path) == before
    done = t.maintenance.rollback(to_tag="two")
    assert sorted(done.files) == sorted(plan.files) and done.bytes_freed == plan.bytes_freed


@pytest.mark.parametrize("target, error", [
    ({"to_tag": "nope"}, TagNotFoundError),
    ({"to_snapshot": 99}, SnapshotNotFoundError),
    ({"to_snapshot": "99"}, SnapshotNotFoundError),
    ({"to_snapshot": 0}, InvalidOptionError),
    ({"to_snapshot": -1}, InvalidOptionError),
    ({"to_time": "1999-01-01"}, SnapshotNotFoundError),
    ({"to_time": dt.datetime(1999, 1, 1, tzinfo=dt.timezone.utc)}, SnapshotNotFoundError),
    ({"to_tag": ""}, InvalidOptionError),
    ({}, InvalidOptionError),
    ({"to_snapshot": True}, InvalidOptionError),
    ({"to_tag": ["two"]}, InvalidOptionError),
    ({"to_tag": "two", "to_time": "1999-01-01"}, InvalidOptionError),
])
def test_bad_targets_change_nothing(history, target, error):
    before = tree_digest(history.path)
    with pytest.raises(error):
        history.maintenance.rollback(**target)
    assert tree_digest(history.path) == before


def test_crash_during_rollback_leaves_a_consistent_table(history, monkeypatch):
    t = history
    reads = snapshot_reads(t)
    total = len(t.maintenance.rollback(to_tag="two", dry_run=True).files)
    for n in range(0, total + 1, 2):
        fail = FailAfter(monkeypatch, t.io, n)
        try:
            t.maintenance.rollback(to_tag="two")
        except FailAfter.Crash:
            pass
        fail.undo()
        check_all_readable(t, reads)
    assert t.snapshot_manager.ids() == [1, 2]
    t.maintenance.remove_orphan_files(older_than=FUTURE)
    check_all_readable(t, reads)
    with pytest.raises(TagNotFoundError):
        t.tags.get("four")


def test_crash_then_commit_never_leaves_a_tag_on_a_reused_snapshot_id(history, monkeypatch):
    t = history                               # snapshots 1..5, tags two (2), four (4)
    fail = FailAfter(monkeypatch, t.io, 2)    # the tag "four" and snapshot 5 go, then the crash
    with pytest.raises(FailAfter.Crash):
        t.maintenance.rollback(to_snapshot=2)
    fail.undo()
    assert t.tags.names() == ["two"]          # newer tags go before any snapshot id can be reused
    assert t.snapshot_manager.ids() == [1, 2, 3, 4]
    assert t.latest_snapshot().id == 4
    upsert(t, [77], 77)                       # the user carries on instead of re-running the rollback
    assert t.latest_snapshot().id == 5
    check_all_readable(t)
    assert t.maintenance.rollback(to_tag="two").rolled_back_to == 2


def test_crash_after_restoring_keeps_the_newer_snapshots_latest(history, monkeypatch):
    t = history
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)     # snapshots 4, 5 remain
    reads = snapshot_reads(t)
    fail = FailAfter(monkeypatch, t.io, 1)    # tag "four" goes, snapshot 2 is written back, then the crash
    with pytest.raises(FailAfter.Crash):
        t.maintenance.rollback(to_tag="two")
    fail.undo()
    assert t.snapshot_manager.ids() == [2, 4, 5]
    assert t.latest_snapshot().id == 5        # not the restored snapshot: the history is unchanged
    assert rows(t.read()) == reads[("snapshot", 5)]
    check_all_readable(t)
    result = t.maintenance.rollback(to_tag="two")         # re-running finishes the job
    assert result.snapshots == [5, 4] and t.snapshot_manager.ids() == [2]
    assert t.latest_snapshot().id == 2 and rows(t.read()) == reads[("tag", "two")]


def test_time_targets_work_in_a_crashed_rollback_state(history, monkeypatch):
    t = history
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)     # snapshots 4, 5 remain
    s4 = t.snapshot(4)
    fail = FailAfter(monkeypatch, t.io, 1)
    with pytest.raises(FailAfter.Crash):
        t.maintenance.rollback(to_tag="two")
    fail.undo()
    t.io.delete(f"{t.path}/snapshot/EARLIEST")                                 # only the listing is left
    assert t.snapshot_manager.ids() == [2, 4, 5]
    assert t.tags.create("at4", as_of=s4.time_millis).snapshot_id == 4
    at4 = dt.datetime.fromtimestamp(s4.time_millis / 1000, dt.timezone.utc)
    assert t.maintenance.rollback(to_time=at4).rolled_back_to == 4
    assert t.snapshot_manager.ids() == [2, 4]
    check_all_readable(t)
