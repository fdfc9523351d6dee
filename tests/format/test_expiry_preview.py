"""The bounded expiry preview (upkeep/expiry_preview.py): on histories with compactions, deletes, tags and a
rollback it lists exactly what the full dry run and the real expiry delete; shown partially, it lists only files
the run deletes and no retained snapshot or tag uses; it reads a bounded number of snapshot files."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_paimon.format.snapshot import SnapshotManager
from airflow_paimon.format.upkeep.expiry_preview import preview_snapshot_expiry, preview_tag_expiry

from .upkeep_helpers import FUTURE, all_files, check_all_readable, delete, live_data_paths, make_table, upsert


def _history(table, rounds: int = 3, first: int = 0) -> None:
    """Commits that replace files: upserts, a delete and a compaction per round, a tag in each round."""
    for r in range(first, first + rounds):
        for i in range(4):
            upsert(table, range(r * 3 + i, r * 3 + i + 5), r * 10 + i)
        delete(table, [r * 3])
        table.maintenance.compact()
        table.tags.create(f"round-{r}")


def _same(preview, full) -> None:
    assert preview.snapshots == full.snapshots
    assert sorted(preview.data_files) == sorted(full.data_files)
    assert sorted(preview.changelog_files) == sorted(full.changelog_files)
    assert sorted(preview.metadata_files) == sorted(full.metadata_files)
    assert preview.bytes_freed == full.bytes_freed


@pytest.mark.parametrize("options", [
    {"snapshot.num-retained.min": "3", "snapshot.time-retained": "1 ms"},
    {"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms", "changelog-producer": "input"},
    {"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms", "changelog-producer": "input",
     "changelog.num-retained.min": "30"},  # the changelog outlives the snapshots
    {"snapshot.num-retained.min": "4", "snapshot.time-retained": "1 ms", "snapshot.expire.limit": "5"},
])
def test_the_preview_lists_what_the_expiry_deletes(tmp_path, options):
    table = make_table(tmp_path, options=options)
    _history(table)
    table.maintenance.rollback(to_tag="round-1")  # newer snapshots and the newer tag go: history stays linear
    _history(table, 2, first=5)
    preview = preview_snapshot_expiry(table, now=FUTURE)
    full = table.maintenance.expire_snapshots(dry_run=True, now=FUTURE)
    assert preview.complete and preview.expirable == len(full.snapshots) > 0
    _same(preview.result, full)
    before = all_files(table.path)
    done = table.maintenance.expire_snapshots(now=FUTURE)
    assert before - all_files(table.path) == set(preview.result.files)
    assert done.snapshots == preview.result.snapshots and preview.first_kept == table.snapshot_manager.ids()[0]
    check_all_readable(table)


def test_a_partial_preview_says_so_and_lists_only_files_nothing_retained_uses(tmp_path):
    table = make_table(tmp_path, options={"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms"})
    _history(table, 4)
    full = table.maintenance.expire_snapshots(dry_run=True, now=FUTURE)
    part = preview_snapshot_expiry(table, now=FUTURE, shown=5)
    assert (part.expirable, len(part.result.snapshots), part.complete) == (len(full.snapshots), 5, False)
    assert part.result.snapshots == full.snapshots[:5]
    assert set(part.result.files) <= set(full.files)
    sm = table.snapshot_manager
    used = set().union(*(live_data_paths(table, sm.snapshot(s)) for s in sm.ids() if s >= part.first_kept),
                       *(live_data_paths(table, t.snapshot) for t in table.tags.list()))
    assert part.result.data_files and not used & set(part.result.data_files)
    with pytest.raises(ValueError, match="shown must be at least 1"):
        preview_snapshot_expiry(table, now=FUTURE, shown=0)


def test_the_preview_reads_a_bounded_number_of_snapshot_files(tmp_path, monkeypatch):
    table = make_table(tmp_path, options={"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 h",
                                          "snapshot.expire.limit": "3"})
    for i in range(40):
        upsert(table, [i % 5], i)
    reads: list[int] = []
    real = SnapshotManager.snapshot
    monkeypatch.setattr(SnapshotManager, "snapshot", lambda self, sid: reads.append(sid) or real(self, sid))
    preview = preview_snapshot_expiry(table, now=FUTURE)
    assert preview.result.snapshots == [1, 2, 3]
    assert len(set(reads)) <= 5, sorted(set(reads))  # the three expired, the first kept and its successor


def test_the_tag_preview_lists_what_tag_expiry_deletes(tmp_path):
    table = make_table(tmp_path, options={"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms"})
    for r in range(3):
        for i in range(3):
            upsert(table, range(r * 4 + i, r * 4 + i + 3), r * 10 + i)
        table.maintenance.compact()
        table.tags.create(f"short-{r}", time_retained=dt.timedelta(hours=1))
        table.tags.create(f"long-{r}")
    table.maintenance.expire_snapshots(now=FUTURE)  # the first two short tags now hold expired snapshots
    preview = preview_tag_expiry(table, now=FUTURE)
    full = table.maintenance.expire_tags(now=FUTURE, dry_run=True)
    assert preview.tags == full.tags == ["short-0", "short-1", "short-2"]
    _same(preview, full)
    before = all_files(table.path)
    table.maintenance.expire_tags(now=FUTURE)
    assert before - all_files(table.path) == set(preview.files)
    check_all_readable(table)
