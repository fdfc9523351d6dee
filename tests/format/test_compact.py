"""Compaction in the library (`table.maintenance.compact`, format/compact.py); the Spark application is tested in
tests/spark/test_compact_orphans.py."""

from __future__ import annotations

import os

from airflow_paimon.format import Catalog
from airflow_paimon.format.compact import max_level, plan_compaction

from .upkeep_helpers import delete, make_table, rows, upsert


def _history(tmp_path):
    """A primary-key table with several level-0 files per bucket, updates and deletes."""
    t = make_table(tmp_path, buckets=2)
    upsert(t, range(30), 0)
    upsert(t, range(20, 40), 1)
    delete(t, range(0, 30, 4))
    upsert(t, range(35, 45), 2)
    return Catalog(str(tmp_path)).get_table("db.t")


def test_full_compaction_of_primary_key_buckets(tmp_path):
    t = _history(tmp_path)
    before = rows(t.read())
    t.create_tag("before-compaction")
    old_entries = t.file_entries(t.latest_snapshot())
    seq_range = {e.bucket: (min(x.file.min_sequence_number for x in old_entries if x.bucket == e.bucket),
                            max(x.file.max_sequence_number for x in old_entries if x.bucket == e.bucket))
                 for e in old_entries}
    assert max_level(t) == 5
    snap = t.maintenance.compact(commit_user="c", commit_identifier=7)
    assert snap.commit_kind == "COMPACT"
    t = Catalog(str(tmp_path)).get_table("db.t")
    entries = t.file_entries(t.latest_snapshot())
    assert sorted(e.bucket for e in entries) == [0, 1]                   # one file per bucket
    for e in entries:
        assert e.file.level == 5 and e.file.delete_row_count == 0 and e.file.file_source == 1
        lo, hi = seq_range[e.bucket]
        assert lo <= e.file.min_sequence_number and e.file.max_sequence_number <= hi
    assert rows(t.read()) == before
    # The tag (and the old snapshot) still read the old files, which are still on disk.
    assert rows(t.read(tag="before-compaction")) == before
    assert all(os.path.exists(t.data_file_path((), e.bucket, e.file)) for e in old_entries)
    # Nothing left to do; a retry of the same commit finds it.
    assert plan_compaction(t) == []
    assert t.maintenance.compact(commit_user="c", commit_identifier=7).id == snap.id
    # Writes after a compaction still win over the compacted rows.
    upsert(t, [1], 9)
    assert dict((r[0], r[2]) for r in rows(t.read()))[1] == 9


def test_compaction_honours_sequence_field(tmp_path):
    t = make_table(tmp_path, options={"sequence.field": "v", "num-levels": "3"})
    upsert(t, range(10), 5)
    upsert(t, range(5), 1)                        # older values (lower sequence.field), newer files
    before = rows(t.read())
    assert dict((r[0], r[2]) for r in before)[0] == 5
    t.maintenance.compact()
    t = Catalog(str(tmp_path)).get_table("db.t")
    assert {e.file.level for e in t.file_entries(t.latest_snapshot())} == {2}
    assert rows(t.read()) == before


def test_a_compaction_run_reports_the_same_result_whoever_compacts(tmp_path):
    """begin_compaction/compact_here, as CompactOperator runs them in the worker (Spark tasks finish the same run)."""
    from airflow_paimon.format.compaction_run import begin_compaction, compact_here

    t = _history(tmp_path)
    files = t.file_entries(t.latest_snapshot())
    run = begin_compaction(t, commit_user="c", commit_identifier=9)
    assert not run.done and run.result["buckets"] == 2 and run.result["level"] == 5
    assert run.total_bytes == 4 * sum(e.file.file_size for e in files)      # every file of both buckets, decoded
    result = compact_here(run)
    assert result["status"] == "committed" and result["snapshot_id"] == t.latest_snapshot().id
    assert (result["files_before"], result["files_after"]) == (len(files), 2)
    again = begin_compaction(t, commit_user="c", commit_identifier=9)
    assert again.done and again.result["status"] == "already_committed"
    assert compact_here(again)["snapshot_id"] == result["snapshot_id"]
    nothing = begin_compaction(t, commit_user="c", commit_identifier=10)
    assert nothing.done and (nothing.result["status"], nothing.result["snapshot_id"]) == ("no_changes",
                                                                                         result["snapshot_id"])
    assert t.latest_snapshot().id == result["snapshot_id"]
