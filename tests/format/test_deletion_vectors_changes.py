"""Change data of primary-key tables with deletion vectors.

`deletion-vectors.enabled` with `changelog-producer = lookup`, which Paimon's guides give together for fast
reads with an exact changelog: each write commits an APPEND snapshot (its level-0 file) and a COMPACT snapshot that
moves the rows up, marks the replaced rows in the vectors and carries the changelog. A key's deleted or replaced
rows above level 0 are then only marked in a vector (the retraction that deleted a key is dropped when its file
moves up), so the lookup of a key's value before a write must not see them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format.errors import UnsupportedTableError

from .changelog_helpers import changelog_rows, replay
from .upkeep_helpers import FUTURE

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


@pytest.fixture
def table(catalog):
    return catalog.create_table("db.t", SCHEMA, primary_keys=["p", "id"], partition_keys=["p"],
                                options={"bucket": "2", "deletion-vectors.enabled": "true",
                                         "changelog-producer": "lookup"})


def _rows(ids, p, v):
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids), "v": [v] * len(ids)})


def _keys(ids, p):
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids)})


def _state(table) -> dict:
    return {(r["p"], r["id"]): r for r in table.read().to_pylist()}


def _last_changelog(table) -> list[tuple]:
    snap = table.latest_snapshot()
    assert snap.commit_kind == "COMPACT"
    assert table.snapshot(snap.id - 1).commit_kind == "APPEND"
    return sorted(changelog_rows(table, snap))


def test_each_write_gives_the_exact_changelog_and_leaves_nothing_at_level_0(table):
    table.write(_rows([1, 2, 3], "a", "v0"))
    assert _last_changelog(table) == [("+I", 1, "a", "v0"), ("+I", 2, "a", "v0"), ("+I", 3, "a", "v0")]
    # one key twice in a write: one merged result; an unchanged value still gives -U/+U (no row-deduplicate)
    table.write(pa.concat_tables([_rows([1], "a", "x"), _rows([1, 2], "a", "v1"), _rows([4], "b", "v1")]))
    assert _last_changelog(table) == [("+I", 4, "b", "v1"), ("+U", 1, "a", "v1"), ("+U", 2, "a", "v1"),
                                      ("-U", 1, "a", "v0"), ("-U", 2, "a", "v0")]
    table.delete(_keys([2, 9], "a"))   # 9 was never there: nothing
    assert _last_changelog(table) == [("-D", 2, "a", "v1")]
    assert all(e.file.level > 0 for e in table.file_entries(table.latest_snapshot()))
    assert table.latest_snapshot().index_manifest is not None
    assert _state(table) == {("a", 1): {"id": 1, "p": "a", "v": "v1"}, ("a", 3): {"id": 3, "p": "a", "v": "v0"},
                             ("b", 4): {"id": 4, "p": "b", "v": "v1"}}
    assert replay(table, ["p", "id"]) == _state(table)


def test_a_key_inserted_again_after_its_delete_is_an_insert(table):
    """The delete's retraction is dropped when its file moves up and the old row is only marked in a vector:
    the key has no value before the next write, whose changelog is +I, not an update of the deleted row."""
    table.write(_rows([1, 2], "a", "old"))
    table.write(_rows([3], "a", "other"))   # a second file above level 0, so the delete below moves by itself
    table.delete(_keys([1], "a"))
    assert _last_changelog(table) == [("-D", 1, "a", "old")]
    table.write(_rows([1], "a", "new"))
    assert _last_changelog(table) == [("+I", 1, "a", "new")]
    table.write(_rows([1], "a", "newer"))
    assert _last_changelog(table) == [("+U", 1, "a", "newer"), ("-U", 1, "a", "new")]
    assert replay(table, ["p", "id"]) == _state(table)
    changes = table.changes(0, mode="changelog").read_all().to_pylist()
    assert [(r["id"], r["_change_type"], r["v"]) for r in changes if r["id"] == 1] == [
        (1, "insert", "old"), (1, "delete", "old"), (1, "insert", "new"), (1, "update_preimage", "new"),
        (1, "update_postimage", "newer")]


def test_a_compaction_describes_nothing_twice(table):
    for i in range(6):   # from the fifth write on, levels 1..j are full and a write merges them
        table.write(_rows([i, i + 1], "a", f"v{i}"))
    # each write's compact increment is the one that moved its rows and marked the vectors: none left files
    # behind that no snapshot lists
    assert table.maintenance.remove_orphan_files(older_than="1 d", now=FUTURE, dry_run=True).files == []
    before = table.latest_snapshot().id
    table.maintenance.compact()
    assert table.latest_snapshot().id == before + 1
    assert changelog_rows(table, table.latest_snapshot()) == []
    assert table.changes(before, mode="changelog").read_all().num_rows == 0
    assert replay(table, ["p", "id"]) == _state(table)


def test_rows_a_write_left_at_level_0_are_described_by_the_next_write_to_their_bucket(table):
    """A rollback to the APPEND half of a write leaves its level-0 file, which reads of the table skip; the next
    write to that bucket moves it up with its own rows, and its changelog covers both."""
    table.write(_rows([1], "a", "v0"))
    table.write(_rows([1], "a", "v1"))
    append = table.latest_snapshot().id - 1
    table.maintenance.rollback(to_snapshot=append)
    assert _state(table)[("a", 1)]["v"] == "v0"   # level 0 skipped
    table.write(_rows([1], "a", "v2"))
    assert _last_changelog(table) == [("+U", 1, "a", "v2"), ("-U", 1, "a", "v0")]
    assert _state(table)[("a", 1)]["v"] == "v2"


def test_full_compaction_with_deletion_vectors_is_refused_as_paimon_refuses_it(catalog):
    with pytest.raises(UnsupportedTableError, match="none, input or lookup"):
        catalog.create_table("db.f", SCHEMA, primary_keys=["p", "id"], partition_keys=["p"],
                             options={"bucket": "2", "deletion-vectors.enabled": "true",
                                      "changelog-producer": "full-compaction"})


def test_a_diff_to_the_compact_half_of_a_write_shows_the_rows_it_moved_up(catalog):
    """A write's APPEND snapshot lists its level-0 file, which a read of the snapshot skips; the COMPACT snapshot
    lists the same file (by name) at a higher level. A diff between the two shows its rows, as reads do."""
    table = catalog.create_table("db.n", SCHEMA, primary_keys=["p", "id"], partition_keys=["p"],
                                 options={"bucket": "2", "deletion-vectors.enabled": "true"})
    table.write(_rows([1], "a", "v0"))
    table.write(_rows([1], "a", "v0"))
    level0 = {e.file.file_name for e in table.file_entries(table.snapshot(1)) if e.file.level == 0}
    assert len(level0) == 1
    assert level0 <= {e.file.file_name for e in table.file_entries(table.snapshot(2)) if e.file.level > 0}
    assert table.read(snapshot_id=1).num_rows == 0 and table.read(snapshot_id=2).num_rows == 1
    rows = table.changes(1, 2, mode="diff").read_all().to_pylist()
    assert [(r["id"], r["_change_type"], r["v"]) for r in rows] == [(1, "insert", "v0")]
    assert table.changes(3, 4, mode="diff").read_all().num_rows == 0   # the same value again: no change
