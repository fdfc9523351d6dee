"""`write-only = true`: writes compact nothing, as Paimon's writers then do (NoopCompactManager), so that they never
race the table's dedicated compaction job. A `lookup` table's writes leave their files at level 0 with no
changelog; the compaction writes the changelog of every row they wrote, once. A `full-compaction` table is not
compacted after its delta commits. A deletion-vector table's writes stay at level 0, which its reads skip, until
the compaction moves them up."""

from __future__ import annotations

import pyarrow as pa

from .changelog_helpers import all_changelog, replay

KV = pa.schema([("k", pa.int64()), ("v", pa.string())])


def kv(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"k": [k for k, _ in pairs], "v": [v for _, v in pairs]}, schema=KV)


def state(table) -> dict:
    return dict(sorted((r["k"], r["v"]) for r in table.read().to_pylist()))


def levels(table) -> list[int]:
    return sorted(e.file.level for e in table.file_entries(table.latest_snapshot()))


def test_lookup_writes_leave_level_0_and_the_compaction_describes_them_once(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "bucket": "2", "changelog-producer": "lookup", "write-only": "true"})
    t.write(kv((1, "a"), (2, "b"), (3, "c")))
    assert all_changelog(t) == [[]]
    t.maintenance.compact()
    assert sorted(all_changelog(t)[-1]) == [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")]
    before = [s.id for s in t.snapshots()]

    t.write(kv((1, "a2"), (4, "d")))
    t.delete(pa.table({"k": [2, 9]}))
    t.write(kv((1, "a3"), (3, "c")))
    new = [s for s in t.snapshots() if s.id not in before]
    assert [s.commit_kind for s in new] == ["APPEND"] * 3
    assert all(rows == [] for rows in all_changelog(t)[len(before):])
    assert 0 in levels(t)
    assert state(t) == {1: "a3", 3: "c", 4: "d"}   # merge-on-read sees level 0

    t.maintenance.compact()
    assert t.latest_snapshot().commit_kind == "COMPACT"
    assert 0 not in levels(t)
    # one merged result per key against the table before the write-only writes; an unchanged key (3) gets -U/+U,
    # as Paimon's lookup compaction gives it without row-deduplicate; the delete of an absent key (9) nothing
    assert sorted(all_changelog(t)[-1]) == sorted([
        ("-U", 1, "a"), ("+U", 1, "a3"), ("-D", 2, "b"), ("-U", 3, "c"), ("+U", 3, "c"), ("+I", 4, "d")])
    assert replay(t, ["k"]) == {(k,): {"k": k, "v": v} for k, v in state(t).items()}
    feed = t.changes(before[-1], None, mode="changelog").read_all()
    assert sorted(zip(feed.column("_change_type").to_pylist(), feed.column("k").to_pylist())) == sorted([
        ("update_preimage", 1), ("update_postimage", 1), ("delete", 2), ("update_preimage", 3),
        ("update_postimage", 3), ("insert", 4)])

    # a later compaction finds nothing old at level 0: nothing is described twice
    t.write(kv((5, "e")))
    t.maintenance.compact()
    assert all_changelog(t)[-1] == [("+I", 5, "e")]


def test_a_full_compaction_table_is_not_compacted_after_its_delta_commits(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "full-compaction", "full-compaction.delta-commits": "1",
        "write-only": "true"})
    t.write(kv((1, "a")))
    t.write(kv((1, "b")))
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "APPEND"]
    t.maintenance.compact()
    assert all_changelog(t)[-1] == [("+I", 1, "b")]


def test_deletion_vector_writes_wait_at_level_0_for_the_compaction(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "bucket": "1", "deletion-vectors.enabled": "true", "write-only": "true"})
    t.write(kv((1, "a"), (2, "b")))
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND"]
    assert levels(t) == [0]
    assert state(t) == {}   # Paimon's reads of a deletion-vector table skip level 0
    t.maintenance.compact()
    assert state(t) == {1: "a", 2: "b"}
    assert 0 not in levels(t)
