"""Changelog lifecycle decoupled from snapshots (`changelog.num-retained.*`, `changelog.time-retained`): snapshot
expiry leaves long-lived changelogs behind, changelog expiry deletes them, and tags, rollback, orphan cleanup and
the change feed know them."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from airflow_paimon.format.errors import InvalidValueError
from airflow_paimon.format.upkeep.changelog_policy import ChangelogPolicy

from .upkeep_helpers import (
    FUTURE,
    FailAfter,
    all_files,
    check_all_readable,
    make_table,
    snapshot_reads,
    tree_digest,
    upsert,
)

PRODUCER = {"changelog-producer": "input", "snapshot.num-retained.min": "2", "snapshot.num-retained.max": "2"}


def _feed(table, start, end) -> list[tuple]:
    got = table.changes(start, end, mode="changelog").read_all()
    keep = [c for c in got.column_names if c != "_commit_timestamp"]
    return sorted((tuple(r.values()) for r in got.select(keep).to_pylist()), key=repr)


def _changelog_data_files(table, snapshot) -> set[str]:
    """Paths of the changelog files a snapshot lists (read independently of the code under test)."""
    codec = table.partition_codec
    out = set()
    if not snapshot.changelog_manifest_list:
        return out
    for m in table.manifest_io.read_list(snapshot.changelog_manifest_list):
        for e in table.manifest_io.read_entries(m.file_name):
            out.add(table.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file))
    return out


def _history(tmp_path, options, commits: int = 6):
    t = make_table(tmp_path, options=options, buckets=1)
    for i in range(commits):
        upsert(t, range(i, i + 3), v=i)
    return t


def _changelog_dir(t) -> list[str]:
    d = f"{t.path}/changelog"
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


@pytest.mark.parametrize(("options", "decoupled"), [
    ({}, False),
    ({"changelog.num-retained.min": "10"}, False),                      # equal to snapshot.num-retained.min
    ({"changelog.num-retained.min": "11"}, True),
    ({"changelog.num-retained.max": "5", "snapshot.num-retained.max": "4", "snapshot.num-retained.min": "2"}, True),
    ({"changelog.num-retained.max": "5", "snapshot.num-retained.min": "2"}, False),  # below Integer.MAX_VALUE
    ({"changelog.time-retained": "1 h"}, False),
    ({"changelog.time-retained": "2 h"}, True),
    ({"changelog.time-retained": "30 min", "snapshot.time-retained": "10 min"}, True),
])
def test_decoupled_exactly_when_paimon_decouples(options, decoupled):
    assert ChangelogPolicy.from_options(options).decoupled is decoupled


def test_not_decoupled_expiry_deletes_changelog_files_and_writes_no_changelog(tmp_path):
    t = _history(tmp_path, PRODUCER)
    old = [_changelog_data_files(t, t.snapshot(i)) for i in (1, 2, 3)]
    assert all(old)
    res = t.maintenance.expire_snapshots(older_than=FUTURE)
    assert res.snapshots == [1, 2, 3, 4]
    assert _changelog_dir(t) == []
    existing = all_files(t.path)
    assert not any(files & existing for files in old)


def test_decoupled_expiry_keeps_exactly_the_changelog_files_retained_changelogs_need(tmp_path):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "5", "changelog.num-retained.min": "4"})
    t.tags.create("t3", snapshot_id=3)
    before = {i: _changelog_data_files(t, t.snapshot(i)) for i in range(1, 7)}
    reads = snapshot_reads(t)
    feed_before = _feed(t, 2, 6)
    snapshot_texts = {i: open(t.snapshot_manager.path(i)).read() for i in range(1, 5)}
    digest = tree_digest(t.path)
    plan = t.maintenance.expire_snapshots(older_than=FUTURE, now=FUTURE, dry_run=True)
    assert tree_digest(t.path) == digest
    res = t.maintenance.expire_snapshots(older_than=FUTURE, now=FUTURE)
    assert sorted(res.data_files) == sorted(plan.data_files)
    assert sorted(res.changelog_files) == sorted(plan.changelog_files)
    assert set(plan.changelog_files) == before[1] | before[2]
    # The dry run lists every file the run deletes but the changelog files the run itself writes, then deletes.
    assert set(res.metadata_files) - set(plan.metadata_files) == {f"{t.path}/changelog/changelog-{i}" for i in (1, 2)}
    assert set(plan.metadata_files) <= set(res.metadata_files)
    assert res.snapshots == [1, 2, 3, 4]
    # Changelog expiry ran in the same call: at least 4 counted back from the latest snapshot 6 stay (3..6).
    assert _changelog_dir(t) == ["EARLIEST", "LATEST", "changelog-3", "changelog-4"]
    assert open(f"{t.path}/changelog/changelog-3").read() == snapshot_texts[3]   # the snapshot's own JSON
    assert open(f"{t.path}/changelog/LATEST").read() == "4"
    assert open(f"{t.path}/changelog/EARLIEST").read() == "3"
    existing = all_files(t.path)
    for i in (3, 4, 5, 6):
        assert before[i] <= existing, f"changelog files of {i} lost"
    for i in (1, 2):
        assert not before[i] & existing, f"changelog files of expired changelog {i} left"
    check_all_readable(t, reads)
    assert _feed(t, 2, 6) == feed_before


def test_changelog_expiry_later_deletes_them_and_the_feed_is_refused_then(tmp_path):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "100", "changelog.num-retained.min": "3",
                            "changelog.time-retained": "1 d"})
    before = {i: _changelog_data_files(t, t.snapshot(i)) for i in range(1, 7)}
    feed_before = _feed(t, 0, 6)
    now = dt.datetime.now(dt.timezone.utc)
    res = t.maintenance.expire_snapshots(older_than=FUTURE, now=now)
    assert res.snapshots == [1, 2, 3, 4]
    assert res.changelog_files == []              # all changelogs younger than a day: kept
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == [f"changelog-{i}" for i in range(1, 5)]
    existing = all_files(t.path)
    assert all(before[i] <= existing for i in range(1, 7))
    assert _feed(t, 0, 6) == feed_before          # the old range reads from the kept changelog
    # A day later: at least 3 counted back from snapshot 6 stay (4..6), the newest changelog (4) always stays.
    digest = tree_digest(t.path)
    plan = t.maintenance.expire_changelogs(dry_run=True, now=now + dt.timedelta(days=2))
    assert tree_digest(t.path) == digest
    done = t.maintenance.expire_changelogs(now=now + dt.timedelta(days=2))
    assert sorted(done.changelog_files) == sorted(plan.changelog_files)
    assert sorted(done.metadata_files) == sorted(plan.metadata_files)
    assert {f"{t.path}/changelog/changelog-{i}" for i in (1, 2, 3)} <= set(done.metadata_files)
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == ["changelog-4"]
    existing = all_files(t.path)
    for i in (1, 2, 3):
        assert not before[i] & existing
    for i in (4, 5, 6):
        assert before[i] <= existing
    assert set(done.changelog_files) == before[1] | before[2] | before[3]
    assert _feed(t, 3, 6) == [r for r in feed_before if r[-1] > 3]   # _commit_version is the last column left
    check_all_readable(t)


def test_rollback_deletes_changelogs_newer_than_its_target(tmp_path):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "100", "changelog.num-retained.min": "50"})
    t.tags.create("t2", snapshot_id=2)
    t.maintenance.expire_snapshots(older_than=FUTURE)
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == [f"changelog-{i}" for i in range(1, 5)]
    kept_two = _changelog_data_files(t, t.tags.get("t2").snapshot)
    plan = t.maintenance.rollback(to_tag="t2", dry_run=True)
    assert {f"{t.path}/changelog/changelog-{i}" for i in (3, 4)} <= set(plan.metadata_files)
    res = t.maintenance.rollback(to_tag="t2")
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == ["changelog-1", "changelog-2"]
    assert open(f"{t.path}/changelog/LATEST").read() == "2"
    assert sorted(res.changelog_files) == sorted(plan.changelog_files)
    assert kept_two <= all_files(t.path)
    assert t.snapshot_manager.ids() == [2]
    check_all_readable(t)


def test_orphan_cleanup_keeps_everything_a_long_lived_changelog_references(tmp_path):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "100", "changelog.num-retained.min": "50"})
    t.maintenance.expire_snapshots(older_than=FUTURE)
    before = all_files(t.path)
    feed_before = _feed(t, 0, 6)
    res = t.maintenance.remove_orphan_files(older_than=FUTURE)
    assert res.paths == []
    assert all_files(t.path) == before
    assert _feed(t, 0, 6) == feed_before


def test_table_without_producer_keeps_what_its_commits_added(tmp_path):
    opts = {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "2", "changelog.num-retained.min": "50",
            "changelog.num-retained.max": "50"}
    t = _history(tmp_path, opts)
    added = {}
    codec = t.partition_codec
    for i in range(1, 7):
        snap = t.snapshot(i)
        added[i] = {t.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file)
                    for m in t.manifest_io.read_list(snap.delta_manifest_list)
                    for e in t.manifest_io.read_entries(m.file_name) if e.kind == 0}
    t.maintenance.expire_snapshots(older_than=FUTURE)
    existing = all_files(t.path)
    for i in range(1, 7):
        assert added[i] <= existing


@pytest.mark.parametrize(("key", "value", "named"), [
    ("changelog.num-retained.min", "0", "changelog.num-retained.min"),
    ("changelog.num-retained.max", "abc", "changelog.num-retained.max"),
    ("changelog.time-retained", "soon", "changelog.time-retained"),
    ("changelog.num-retained.max", "0", "changelog.num-retained.max"),
    ("changelog.num-retained.min", "5", "changelog.num-retained.max"),   # above snapshot.num-retained.max 1
])
def test_bad_changelog_option_is_a_clear_error_that_changes_no_byte(tmp_path, key, value, named):
    t = _history(tmp_path, {"changelog-producer": "input", "snapshot.num-retained.min": "1",
                            "snapshot.num-retained.max": "1", key: value})
    digest = tree_digest(tmp_path)
    for call in (lambda: t.maintenance.expire_snapshots(older_than=FUTURE, retain_min=1),
                 lambda: t.maintenance.expire_changelogs()):
        with pytest.raises(InvalidValueError, match=named.replace(".", r"\.")):
            call()
        assert tree_digest(tmp_path) == digest


def test_feed_over_kept_changelog_equals_feed_before_expiry_with_deletes(tmp_path):
    t = make_table(tmp_path, options={**PRODUCER, "changelog.num-retained.min": "20",
                                      "changelog.num-retained.max": "20"}, buckets=2)
    upsert(t, range(10), v=1)
    t.delete(pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "a"]}))
    upsert(t, range(5), v=2)
    upsert(t, [7], v=3)
    before = _feed(t, 0, 4)
    t.maintenance.expire_snapshots(older_than=FUTURE)
    assert t.snapshot_manager.ids() == [3, 4]
    assert _feed(t, 0, 4) == before


def test_expiry_of_both_waits_for_consumers(tmp_path):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "100", "changelog.num-retained.min": "1"})
    t.consumers.create("reader", 3)
    t.maintenance.expire_snapshots(older_than=FUTURE, now=FUTURE)
    assert t.snapshot_manager.ids() == [3, 4, 5, 6]
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == ["changelog-2"]   # the newest stays
    assert {r[-1] for r in _feed(t, 1, 6)} == {2, 3, 4, 5, 6}   # snapshot 2 read from its changelog
    t.consumers.delete("reader")
    t.maintenance.expire_snapshots(older_than=FUTURE, now=FUTURE)
    assert t.snapshot_manager.ids() == [5, 6]
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == ["changelog-4"]


def test_deleting_a_tag_keeps_what_long_lived_changelogs_use(tmp_path):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "100", "changelog.num-retained.min": "50"})
    t.tags.create("t2", snapshot_id=2)
    t.maintenance.expire_snapshots(older_than=FUTURE)
    before = {i: _changelog_data_files(t, t.snapshot_manager.snapshot(i)) if t.snapshot_manager.exists(i)
              else set() for i in (5, 6)}
    kept = {i: _changelog_data_files(t, t.tags.get("t2").snapshot) for i in (2,)}
    feed_before = _feed(t, 0, 6)
    t.maintenance.delete_tag("t2")
    assert kept[2] <= all_files(t.path)
    assert _feed(t, 0, 6) == feed_before
    assert all(files <= all_files(t.path) for files in before.values())


def test_orphan_cleanup_keeps_the_lists_a_paimon_written_changelog_names(tmp_path):
    """Paimon's expiry of a table without producer keeps an expired snapshot's base and delta lists for its
    long-lived changelog: orphan cleanup must count them as used."""
    t = _history(tmp_path, {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "2",
                            "changelog.num-retained.min": "50", "changelog.num-retained.max": "50"})
    sm = t.snapshot_manager
    named = set()
    os.makedirs(f"{t.path}/changelog", exist_ok=True)
    for i in (1, 2, 3):
        snap = sm.snapshot(i)
        named |= {f"{t.path}/manifest/{snap.base_manifest_list}", f"{t.path}/manifest/{snap.delta_manifest_list}"}
        with open(f"{t.path}/changelog/changelog-{i}", "w") as f:
            f.write(open(sm.path(i)).read())
        os.remove(sm.path(i))
    with open(f"{t.path}/changelog/LATEST", "w") as f:
        f.write("3")
    res = t.maintenance.remove_orphan_files(older_than=FUTURE)
    assert not set(res.paths) & named
    assert named <= all_files(t.path)


@pytest.mark.parametrize("crash_after", [0, 2, 5])
def test_a_crash_in_decoupled_expiry_loses_no_changelog(tmp_path, monkeypatch, crash_after):
    t = _history(tmp_path, {**PRODUCER, "changelog.num-retained.max": "100", "changelog.num-retained.min": "50"})
    needed = set().union(*(_changelog_data_files(t, t.snapshot(i)) for i in range(1, 7)))
    feed_before = _feed(t, 0, 6)
    crash = FailAfter(monkeypatch, t.io, crash_after)
    with pytest.raises(FailAfter.Crash):
        t.maintenance.expire_snapshots(older_than=FUTURE)
    assert needed <= all_files(t.path)
    assert _feed(t, 0, 6) == feed_before
    crash.undo()
    t.maintenance.expire_snapshots(older_than=FUTURE)
    assert needed <= all_files(t.path)
    assert _feed(t, 0, 6) == feed_before
    assert [n for n in _changelog_dir(t) if n.startswith("changelog-")] == [f"changelog-{i}" for i in range(1, 5)]
    check_all_readable(t)
