"""Changelog producers (none, input, lookup, full-compaction): the files, snapshots and rows Paimon would write."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_paimon.format import CommitMessage
from airflow_paimon.format.errors import InvalidOptionError, UnsupportedTableError

from .changelog_helpers import all_changelog, changelog_rows, changelog_sequence_numbers, replay
from .upkeep_helpers import tree_digest

ABC = pa.schema([("a", pa.int32()), ("b", pa.int32()), ("c", pa.string())])
KV = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.int64())])
INS, UB, UA, D = 0, 1, 2, 3


def abc(rows):
    return pa.table({"a": pa.array([r[0] for r in rows], pa.int32()), "b": pa.array([r[1] for r in rows], pa.int32()),
                     "c": [r[2] for r in rows]}, schema=ABC)


def kv(rows):
    cols = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.table({"k": pa.array(cols[0], pa.int64()), "p": pa.array(cols[1], pa.string()),
                     "v": pa.array(cols[2], pa.int64()), "s": pa.array(cols[3], pa.int64())}, schema=KV)


def set_options(catalog, name, options):
    """The table with a new schema carrying more options (as Paimon's ALTER TABLE SET does)."""
    t = catalog.get_table(name)
    schema = t.schema()
    assert t.schema_manager.create(dataclasses.replace(schema, id=schema.id + 1,
                                                       options={**schema.options, **options}))
    return catalog.get_table(name)


def kinds(*codes):
    return pa.array(codes, pa.int8())


def seed_example(catalog, producer, extra=None):
    """Seed 003's table and writes: two inserts of key 1, then an update of it (-U/+U rows)."""
    t = catalog.create_table(f"db.t_{producer.replace('-', '_')}", ABC, primary_keys=["a"],
                             options={"changelog-producer": producer, **(extra or {})})
    t.write(abc([(1, 1, "1")]))
    t.write(abc([(1, 1, "2")]))
    t.write(abc([(1, 1, "2"), (1, 1, "3")]), kinds=kinds(UB, UA))
    return t


# ---- seed 003 under each producer ----------------------------------------------------------------------

def test_seed_example_none_writes_no_changelog(catalog):
    t = seed_example(catalog, "none")
    assert all(s.changelog_manifest_list is None and s.changelog_record_count == 0 for s in t.snapshots())
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND"] * 3


def test_seed_example_input_is_the_input_rows(catalog):
    t = seed_example(catalog, "input")
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND"] * 3
    assert all_changelog(t) == [[("+I", 1, 1, "1")], [("+I", 1, 1, "2")], [("-U", 1, 1, "2"), ("+U", 1, 1, "3")]]
    assert [s.changelog_record_count for s in t.snapshots()] == [1, 1, 2]


def test_seed_example_lookup_is_the_exact_changes(catalog):
    t = seed_example(catalog, "lookup")
    # Each write: an APPEND snapshot (level-0 file) and a COMPACT snapshot that moves it up with the changelog.
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "COMPACT"] * 3
    assert all_changelog(t) == [[], [("+I", 1, 1, "1")], [], [("-U", 1, 1, "1"), ("+U", 1, 1, "2")],
                                [], [("-U", 1, 1, "2"), ("+U", 1, 1, "3")]]
    assert all(e.file.level > 0 for e in t.file_entries(t.latest_snapshot()))
    assert t.read().to_pylist() == [{"a": 1, "b": 1, "c": "3"}]


def test_seed_example_full_compaction_after_every_commit(catalog):
    t = seed_example(catalog, "full-compaction", {"full-compaction.delta-commits": "1"})
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "COMPACT"] * 3
    assert all_changelog(t) == [[], [("+I", 1, 1, "1")], [], [("-U", 1, 1, "1"), ("+U", 1, 1, "2")],
                                [], [("-U", 1, 1, "2"), ("+U", 1, 1, "3")]]


def test_seed_example_full_compaction_describes_only_what_it_compacts(catalog):
    t = seed_example(catalog, "full-compaction")
    assert all(s.changelog_manifest_list is None for s in t.snapshots())
    snap = t.maintenance.compact()
    assert snap.commit_kind == "COMPACT" and changelog_rows(t, snap) == [("+I", 1, 1, "3")]
    assert t.maintenance.compact() is None


# ---- input -----------------------------------------------------------------------------------------------

def test_input_keeps_every_row_with_its_own_sequence_number(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k", "p"], partition_keys=["p"],
                             options={"changelog-producer": "input", "bucket": "3"})
    t.write(kv([(1, "x", 1, 0), (2, "y", 2, 0)]))
    snap = t.write(kv([(1, "x", 10, 0), (1, "x", 11, 0), (9, "x", None, None), (2, "y", 2, 0)]),
                   kinds=kinds(UA, UA, D, UA))
    rows = changelog_rows(t, snap)
    assert sorted(rows) == sorted([("+U", 1, "x", 10, 0), ("+U", 1, "x", 11, 0), ("-D", 9, "x", None, None),
                                   ("+U", 2, "y", 2, 0)])
    # Two updates of key 1 in order; the data file keeps the newest with the higher sequence number.
    assert rows.index(("+U", 1, "x", 10, 0)) < rows.index(("+U", 1, "x", 11, 0))
    seq = dict(zip(rows, changelog_sequence_numbers(t, snap)))
    assert seq[("+U", 1, "x", 10, 0)] < seq[("+U", 1, "x", 11, 0)]
    stored = [e.file for e in t.file_entries(snap) if e.file.file_name.startswith("data-")]
    assert max(f.max_sequence_number for f in stored) >= seq[("+U", 1, "x", 11, 0)]
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: 11, 2: 2}
    later = t.write(kv([(1, "x", 12, 0)]))
    assert changelog_rows(t, later) == [("+I", 1, "x", 12, 0)]
    assert t.read(filter=pa.compute.field("k") == 1).column("v").to_pylist() == [12]


def test_input_with_sequence_field_keeps_rows_in_version_order(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={"changelog-producer": "input",
                                                                      "sequence.field": "s"})
    snap = t.write(kv([(1, "a", 1, 5), (1, "a", 2, 3)]))
    assert changelog_rows(t, snap) == [("+I", 1, "a", 2, 3), ("+I", 1, "a", 1, 5)]
    assert t.read().column("v").to_pylist() == [1]


# ---- lookup ----------------------------------------------------------------------------------------------

def make_lookup(catalog, extra=None, name="db.t"):
    return catalog.create_table(name, KV, primary_keys=["k", "p"], partition_keys=["p"],
                                options={"changelog-producer": "lookup", "bucket": "2", **(extra or {})})


def test_lookup_deletes_updates_and_equal_values(catalog):
    t = make_lookup(catalog)
    t.write(kv([(1, "x", 1, 0), (2, "x", 2, 0), (3, "y", 3, 0)]))
    snap = t.write(kv([(1, "x", 1, 0), (2, "x", 20, 0), (3, "y", None, None), (4, "y", None, None),
                       (5, "y", 5, 0)]), kinds=kinds(UA, UA, D, D, INS))
    assert sorted(changelog_rows(t, snap)) == sorted([
        ("-U", 1, "x", 1, 0), ("+U", 1, "x", 1, 0),        # equal values: still -U/+U without row-deduplicate
        ("-U", 2, "x", 2, 0), ("+U", 2, "x", 20, 0),
        ("-D", 3, "y", 3, 0),                              # the deleted row as it was
        ("+I", 5, "y", 5, 0)])                             # deleting the absent key 4 gives nothing


def test_lookup_row_deduplicate_and_its_ignored_fields(catalog):
    t = make_lookup(catalog, {"changelog-producer.row-deduplicate": "true",
                              "changelog-producer.row-deduplicate-ignore-fields": "s"})
    t.write(kv([(1, "x", 1, 0), (2, "x", 2, 0), (3, "x", 3, 0)]))
    snap = t.write(kv([(1, "x", 1, 0), (2, "x", 2, 99), (3, "x", 30, 0)]))
    assert changelog_rows(t, snap) == [("-U", 3, "x", 3, 0), ("+U", 3, "x", 30, 0)]
    assert {r["k"]: r["s"] for r in t.read().to_pylist()}[2] == 99


def test_lookup_merges_several_changes_of_a_key_and_respects_sequence_field(catalog):
    t = make_lookup(catalog, {"sequence.field": "s"})
    t.write(kv([(1, "x", 1, 10), (2, "x", 2, 10)]))
    snap = t.write(kv([(1, "x", 5, 11), (1, "x", 6, 12), (1, "x", 7, 11), (2, "x", 9, 3), (3, "x", 1, 1),
                       (3, "x", None, None)]), kinds=kinds(UA, UA, UA, UA, INS, D))
    assert sorted(changelog_rows(t, snap)) == sorted([
        ("-U", 1, "x", 1, 10), ("+U", 1, "x", 6, 12),      # three updates: the highest sequence field wins
        ("-U", 2, "x", 2, 10), ("+U", 2, "x", 2, 10),      # a lower sequence field loses to the stored value
        ("+I", 3, "x", 1, 1)])
    # Key 3: inserted and deleted in one commit; the -D has no sequence field (NULL sorts first), so +I wins.
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: 6, 2: 2, 3: 1}


def test_lookup_reads_only_the_files_whose_key_range_can_hold_the_keys(catalog, monkeypatch):
    from airflow_paimon.format import key_reads
    from airflow_paimon.format.changelog import lookup as lookup_module
    from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV
    monkeypatch.setenv(LOOKUP_DIR_ENV, "")   # the data files themselves: test_lookup_files.py covers the copies
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={"changelog-producer": "lookup",
                                                                      "bucket": "1"})
    for start in range(0, 30, 10):
        t.write(kv([(k, "a", k, 0) for k in range(start, start + 10)]))
    whole: list[str] = []
    opened: list[tuple[str, tuple[str, ...]]] = []
    real_read, real_file = lookup_module.Lookup.read, key_reads.read_data_file

    def counting(self, partition, bucket, files):
        whole.extend(f.file_name for f in files)
        return real_read(self, partition, bucket, files)

    def counting_file(io, path, columns, target, rows=None):
        opened.append((path.rsplit("/", 1)[-1], columns.names))
        return real_file(io, path, columns, target, rows)

    monkeypatch.setattr(lookup_module.Lookup, "read", counting)
    monkeypatch.setattr(key_reads, "read_data_file", counting_file)
    snap = t.write(kv([(25, "a", 250, 0)]))
    assert changelog_rows(t, snap) == [("-U", 25, "a", 25, 0), ("+U", 25, "a", 250, 0)]
    # The before value comes from the one file holding keys 20..29 (its key column first, then its values); no
    # file is read whole, and the new file moves up by metadata only.
    assert whole == []
    assert len({name for name, _ in opened}) == 1
    assert opened[0][1] == ("k",)
    assert sorted(e.file.level for e in t.file_entries(snap)) == [1, 2, 3, 4]


def test_lookup_never_leaves_described_rows_at_level_zero_and_compaction_does_not_repeat_them(catalog):
    t = make_lookup(catalog)
    rng = random.Random(7)
    for _ in range(8):   # more writes than levels: the new file is sometimes merged into level 1..j
        keys = rng.sample(range(30), 8)
        t.write(kv([(k, rng.choice("xy"), rng.randrange(100), 0) for k in keys]))
        assert all(e.file.level > 0 for e in t.file_entries(t.latest_snapshot()))
    state = replay(t, ["k", "p"])
    assert sorted(state.values(), key=lambda r: (r["k"], r["p"])) == \
        sorted(t.read().to_pylist(), key=lambda r: (r["k"], r["p"]))
    snap = t.maintenance.compact()
    assert snap is not None and snap.changelog_manifest_list is None and snap.changelog_record_count == 0


def test_lookup_compaction_describes_level_zero_rows_left_by_other_writers(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={"bucket": "1"})
    t.write(kv([(1, "a", 1, 0), (2, "a", 2, 0)]))
    t.maintenance.compact()
    t.write(kv([(1, "a", 10, 0), (3, "a", 3, 0)]))
    t.write(kv([(2, "a", 0, 0)]), kinds=kinds(D))
    t = set_options(catalog, "db.t", {"changelog-producer": "lookup"})
    snap = t.maintenance.compact()
    assert sorted(changelog_rows(t, snap)) == sorted([("-U", 1, "a", 1, 0), ("+U", 1, "a", 10, 0),
                                                      ("+I", 3, "a", 3, 0), ("-D", 2, "a", 2, 0)])


def test_lookup_random_writes_replay_to_the_table(catalog):
    t = make_lookup(catalog, {"sequence.field": "s", "bucket": "3"})
    rng = random.Random(3)
    for _ in range(6):
        rows, codes = [], []
        for _ in range(12):
            k = rng.randrange(15)
            if rng.random() < 0.25:
                rows.append((k, rng.choice("xy"), None, None))
                codes.append(D)
            else:
                rows.append((k, rng.choice("xy"), rng.randrange(5), rng.randrange(5)))
                codes.append(UA)
        t.write(kv(rows), kinds=kinds(*codes))
    state = replay(t, ["k", "p"])
    assert sorted(state.values(), key=lambda r: (r["k"], r["p"])) == \
        sorted(t.read().to_pylist(), key=lambda r: (r["k"], r["p"]))


def test_lookup_exactly_once_and_concurrent_writers(catalog):
    import threading
    t = make_lookup(catalog)
    first = t.write(kv([(1, "x", 1, 0)]), commit_user="u", commit_identifier=1)
    again = t.write(kv([(1, "x", 2, 0)]), commit_user="u", commit_identifier=1)
    assert again.id == first.id and first.commit_kind == "COMPACT" and len(t.snapshots()) == 2
    errors = []

    def writer(n):
        try:
            for i in range(3):
                catalog.get_table("db.t").write(kv([(k, "x", n * 100 + i, 0) for k in range(5)]))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    # A writer whose COMPACT snapshot lost to a concurrent one leaves its rows at level 0; the next write to the
    # bucket describes them.
    t.write(kv([(k, "x", -1, 0) for k in range(5)]))
    assert all(e.file.level > 0 for e in t.file_entries(t.latest_snapshot()))
    state = replay(t, ["k", "p"])
    assert sorted(state.values(), key=lambda r: r["k"]) == sorted(t.read().to_pylist(), key=lambda r: r["k"])


def test_a_lookup_writes_compaction_is_checked_only_against_what_others_committed(catalog, monkeypatch):
    """The COMPACT snapshot of a lookup write checks that its levels are still free only when another writer
    committed since its own APPEND snapshot (which moves nothing): then a level taken meanwhile refuses it, and its
    rows stay at level 0 for the next write to describe."""
    from airflow_paimon.format import commit as commit_module
    t = make_lookup(catalog)
    t.write(kv([(k, "x", k, 0) for k in range(5)]))
    checked = []
    real_check = commit_module.Transaction._check_levels_free

    def spy(self, *args):
        checked.append(args[1].id)
        return real_check(self, *args)

    monkeypatch.setattr(commit_module.Transaction, "_check_levels_free", spy)
    t.write(kv([(1, "x", 10, 0)]))
    assert checked == [] and t.latest_snapshot().commit_kind == "COMPACT"
    # the two snapshots of one write leave the LATEST hint at the second
    assert int((Path(t.path) / "snapshot" / "LATEST").read_text()) == t.latest_snapshot().id

    real_commit = commit_module.Transaction._commit_entries
    interleaved: list = []

    def other_writer_between(self, entries, changelog, base_id, kind, **kw):
        if kind == "COMPACT" and not interleaved:
            interleaved.append(None)   # (the other writer's own commits pass straight through)
            interleaved[0] = catalog.get_table("db.t").write(kv([(3, "x", 20, 0)]))   # the same bucket
        return real_commit(self, entries, changelog, base_id, kind, **kw)

    monkeypatch.setattr(commit_module.Transaction, "_commit_entries", other_writer_between)
    landed = t.write(kv([(3, "x", 30, 0)]))
    assert interleaved and checked == [interleaved[0].id]
    # the other writer took the level this write would have moved its file to: its APPEND snapshot stays
    assert landed.commit_kind == "APPEND" and any(e.file.level == 0 for e in t.file_entries(landed))
    # (the other writer's commits came after it: the LATEST hint is theirs)
    assert int((Path(t.path) / "snapshot" / "LATEST").read_text()) == interleaved[0].id
    monkeypatch.setattr(commit_module.Transaction, "_commit_entries", real_commit)
    t.write(kv([(4, "x", 40, 0)]))
    assert all(e.file.level > 0 for e in t.file_entries(t.latest_snapshot()))
    state = replay(t, ["k", "p"])
    assert sorted(state.values(), key=lambda r: r["k"]) == sorted(t.read().to_pylist(), key=lambda r: r["k"])


# ---- full-compaction -------------------------------------------------------------------------------------

def test_full_compaction_every_n_delta_commits(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k", "p"], partition_keys=["p"],
                             options={"changelog-producer": "full-compaction", "bucket": "2",
                                      "full-compaction.delta-commits": "2", "sequence.field": "s"})
    t.write(kv([(1, "x", 1, 1), (2, "y", 2, 1)]))
    t.write(kv([(1, "x", 5, 0), (1, "x", 6, 2), (3, "y", None, 5), (2, "y", None, 5)]),
            kinds=kinds(UA, UA, D, D))
    kinds_seen = [s.commit_kind for s in t.snapshots()]
    assert kinds_seen == ["APPEND", "APPEND", "COMPACT"]
    assert sorted(changelog_rows(t, t.latest_snapshot())) == [("+I", 1, "x", 6, 2)]
    t.write(kv([(1, "x", 7, 1)]))           # loses to s = 2: -U/+U of the same row
    assert [s.commit_kind for s in t.snapshots()][-1] == "APPEND"
    t.write(kv([(4, "x", 4, 0)]))
    assert sorted(changelog_rows(t, t.latest_snapshot())) == sorted([
        ("-U", 1, "x", 6, 2), ("+U", 1, "x", 6, 2), ("+I", 4, "x", 4, 0)])
    state = replay(t, ["k", "p"])
    assert sorted(state.values(), key=lambda r: r["k"]) == sorted(t.read().to_pylist(), key=lambda r: r["k"])


def test_full_compaction_row_deduplicate_and_deletes(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "changelog-producer": "full-compaction", "changelog-producer.row-deduplicate": "true"})
    t.write(kv([(1, "a", 1, 0), (2, "a", 2, 0)]))
    t.maintenance.compact()
    t.write(kv([(1, "a", 1, 0), (2, "a", None, None), (7, "a", None, None)]), kinds=kinds(UA, D, D))
    assert changelog_rows(t, t.maintenance.compact()) == [("-D", 2, "a", 2, 0)]


# ---- refusals ------------------------------------------------------------------------------------------

def test_producer_needs_a_primary_key(catalog):
    with pytest.raises(InvalidOptionError, match="changelog-producer: 'input' needs a primary-key table"):
        catalog.create_table("db.a", KV, options={"changelog-producer": "input"})
    assert not os.path.exists(os.path.join(catalog.warehouse, "db.db", "a")) if hasattr(catalog, "warehouse") else True


def test_lookup_with_delta_commits_is_refused(catalog):
    with pytest.raises(InvalidOptionError, match="full-compaction.delta-commits: incompatible"):
        make_lookup(catalog, {"full-compaction.delta-commits": "3"})


def test_lookup_write_describes_level_zero_rows_it_finds(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={"bucket": "1"})
    t.write(kv([(1, "a", 1, 0), (2, "a", 2, 0)]))
    t.maintenance.compact()
    t.write(kv([(1, "a", 10, 0)]))                          # a level-0 file nobody described
    t = set_options(catalog, "db.t", {"changelog-producer": "lookup"})
    snap = t.write(kv([(2, "a", 20, 0)]))
    assert sorted(changelog_rows(t, snap)) == sorted([("-U", 1, "a", 1, 0), ("+U", 1, "a", 10, 0),
                                                      ("-U", 2, "a", 2, 0), ("+U", 2, "a", 20, 0)])
    assert all(e.file.level > 0 for e in t.file_entries(snap))
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: 10, 2: 20}


def test_writer_without_the_changelog_is_refused_before_it_writes(catalog):
    t = make_lookup(catalog)
    t.write(kv([(1, "x", 1, 0)]))
    before = tree_digest(t.path)
    with pytest.raises(UnsupportedTableError, match="changelog-producer is 'lookup'.*does not produce"):
        t.transaction()
    with pytest.raises(UnsupportedTableError, match="changelog-producer is 'lookup'"):
        t.commit([])
    inp = catalog.create_table("db.i", KV, primary_keys=["k"], options={"changelog-producer": "input"})
    with pytest.raises(UnsupportedTableError, match="'input'"):
        inp.transaction(kind="APPEND", changelog="lookup")
    inp.transaction(kind="COMPACT")     # an input table's compactions owe no changelog
    assert tree_digest(t.path) == before


def test_commit_message_round_trips_its_changelog(catalog):
    t = make_lookup(catalog)
    t.write(kv([(1, "x", 1, 0)]))
    msgs = t.new_write().write(kv([(1, "x", 2, 0)]), base_snapshot=t.latest_snapshot())
    assert msgs[0].compact_changelog and msgs[0].compact_after
    assert [CommitMessage.from_dict(m.to_dict()) for m in msgs] == msgs


def test_lookup_crash_between_the_two_snapshots_loses_no_change(catalog):
    """The APPEND snapshot landed, its COMPACT one did not (the process died): a retry of the same commit id
    finds the commit and writes nothing; the next write describes the rows left at level 0."""
    from airflow_paimon.format.commit import CommitId
    t = make_lookup(catalog)
    t.write(kv([(1, "x", 1, 0), (2, "x", 2, 0)]))
    msgs = t.new_write().write(kv([(1, "x", 10, 0)]), base_snapshot=t.latest_snapshot())
    crashed = [CommitMessage(m.partition, m.bucket, m.total_buckets, m.new_files) for m in msgs]
    landed = t.transaction(commit_id=CommitId("u", 5), changelog="lookup").commit(crashed)
    assert landed.commit_kind == "APPEND" and landed.changelog_manifest_list is None
    assert t.write(kv([(1, "x", 99, 0)]), commit_user="u", commit_identifier=5).id == landed.id
    assert t.latest_snapshot().id == landed.id
    snap = t.write(kv([(2, "x", 20, 0)]))
    assert sorted(changelog_rows(t, snap)) == sorted([("-U", 1, "x", 1, 0), ("+U", 1, "x", 10, 0),
                                                      ("-U", 2, "x", 2, 0), ("+U", 2, "x", 20, 0)])
    state = replay(t, ["k", "p"])
    assert sorted(state.values(), key=lambda r: r["k"]) == sorted(t.read().to_pylist(), key=lambda r: r["k"])
