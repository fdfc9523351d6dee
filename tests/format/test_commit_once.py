"""One meaning of "already committed" for every library writer: a commit whose snapshot expired is still found
while a tag holds it, so a retried task never commits it twice."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_paimon.format import CommitId, Snapshot, Table

from .upkeep_helpers import FUTURE, make_table, upsert


def hold_in_tag_only(table: Table, snap: Snapshot) -> None:
    """Tag `snap`, commit after it and expire every snapshot but the latest: only the tag still holds it."""
    table.create_tag("held", snapshot_id=snap.id)
    upsert(table, [90, 91], 0)
    table.maintenance.expire_snapshots(retain_min=1, retain_max=1, older_than=FUTURE)
    assert snap.id not in [s.id for s in table.snapshots()]


def data_files(table: Table) -> set[Path]:
    return set(Path(table.path).rglob("data-*"))


def rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": ["a"] * len(ids), "v": pa.array([v] * len(ids), pa.int64())})


def test_a_write_held_only_by_a_tag_is_not_written_again(tmp_path):
    t = make_table(tmp_path)
    first = t.write(rows([1, 2], 1), commit_user="u", commit_identifier=7)
    hold_in_tag_only(t, first)
    latest, files = t.latest_snapshot().id, data_files(t)
    again = t.write(rows([1, 2], 2), commit_user="u", commit_identifier=7)
    assert again.id == first.id and t.latest_snapshot().id == latest and data_files(t) == files
    assert {r["v"] for r in t.read().to_pylist() if r["id"] in (1, 2)} == {1}


def test_a_delete_held_only_by_a_tag_is_not_applied_again(tmp_path):
    t = make_table(tmp_path)
    upsert(t, [1, 2, 3], 1)
    first = t.delete(pa.table({"id": pa.array([1], pa.int64())}), commit_user="u", commit_identifier=8)
    hold_in_tag_only(t, first)
    upsert(t, [1], 5)
    latest = t.latest_snapshot().id
    again = t.delete(pa.table({"id": pa.array([1], pa.int64())}), commit_user="u", commit_identifier=8)
    assert again.id == first.id and t.latest_snapshot().id == latest
    assert 1 in [r["id"] for r in t.read().to_pylist()]


def test_a_compaction_held_only_by_a_tag_is_not_done_again(tmp_path):
    t = make_table(tmp_path, buckets=1)
    for v in range(3):
        upsert(t, [1, 2, 3], v)
    first = t.maintenance.compact(commit_user="compactor", commit_identifier=3)
    assert first is not None and first.commit_kind == "COMPACT"
    hold_in_tag_only(t, first)
    for v in range(3):
        upsert(t, [4, 5], v)   # work a new compaction would do
    latest, files = t.latest_snapshot().id, data_files(t)
    again = t.maintenance.compact(commit_user="compactor", commit_identifier=3)
    assert again.id == first.id and t.latest_snapshot().id == latest
    assert data_files(t) == files   # found before compacting: no file written for nothing


def test_a_transaction_and_table_commit_find_a_tag_held_commit(tmp_path):
    t = make_table(tmp_path)
    tx = t.transaction(commit_id=CommitId("u", 9))
    assert tx.already_committed is None
    first = tx.commit(t.new_write().write(rows([1], 1), base_snapshot=tx.base))
    hold_in_tag_only(t, first)
    assert t.find_commit(CommitId("u", 9)).id == first.id
    assert t.transaction(commit_id=CommitId("u", 9)).already_committed.id == first.id
    latest = t.latest_snapshot()
    messages = t.new_write().write(rows([1], 2), base_snapshot=latest)
    assert t.commit(messages, commit_user="u", commit_identifier=9, base_snapshot_id=latest.id).id == first.id
    assert t.latest_snapshot().id == latest.id


def test_commit_id_needs_a_user_and_table_commit_takes_keywords_only(tmp_path):
    with pytest.raises(ValueError, match="commit user"):
        CommitId("", 1)
    assert CommitId.of("u", None) is None and CommitId.of("u", "3") == CommitId("u", 3)
    t = make_table(tmp_path)
    messages = t.new_write().write(rows([1], 1))
    with pytest.raises(TypeError):
        t.commit(messages, "u", 1)   # positional commit arguments are refused
    assert t.latest_snapshot() is None
