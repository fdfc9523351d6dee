"""Snapshot expiry: Paimon's retention rules and defaults, a live set built from every retained snapshot and
every tag, dry runs, bad inputs, crash safety, and expiry of tags."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from airflow_paimon.format import InvalidOptionError, SnapshotNotFoundError, UnsupportedTableError
from airflow_paimon.format.upkeep.expire_policy import ExpirePolicy
from airflow_paimon.format.upkeep.file_index import FileIndex

from .upkeep_helpers import (
    FUTURE,
    FailAfter,
    all_files,
    check_all_readable,
    live_data_paths,
    make_table,
    metadata_paths,
    rows,
    snapshot_reads,
    store_file,
    tree_digest,
    upsert,
)


def _commits(table, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        upsert(table, [i % 7, 100 + i], i)


@pytest.fixture
def churn(warehouse):
    """A table whose history replaces data files: commits, compactions, and a tag in the middle."""
    t = make_table(warehouse)
    for i in range(4):
        upsert(t, range(i * 3, i * 3 + 6), i)
    t.maintenance.compact()                 # 5
    t.tags.create("mid")                    # tag on 5
    for i in range(4, 7):
        upsert(t, range(i, i + 4), i)       # 6..8
    t.maintenance.compact()                 # 9
    upsert(t, [1], 99)                      # 10
    return t


# ---- which snapshots expire ------------------------------------------------------------------------------

def test_defaults_keep_recent_snapshots(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 12)
    before = tree_digest(t.path)
    # snapshot.time-retained defaults to 1 h: nothing this young expires
    result = t.maintenance.expire_snapshots()
    assert result.snapshots == [] and tree_digest(t.path) == before
    # two hours on: snapshot.num-retained.min (10) keeps 3..12; 1 and 2 go
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    result = t.maintenance.expire_snapshots(now=later)
    assert result.snapshots == [1, 2]
    assert t.snapshot_manager.ids() == list(range(3, 13))


def test_expire_limit_and_arguments_override_options(tmp_path):
    t = make_table(tmp_path, options={"snapshot.num-retained.min": "2", "snapshot.expire.limit": "3",
                                      "snapshot.time-retained": "1 ms"})
    _commits(t, 10)
    assert t.maintenance.expire_snapshots(now=FUTURE).snapshots == [1, 2, 3]           # snapshot.expire.limit
    assert t.maintenance.expire_snapshots(now=FUTURE, max_deletes=100).snapshots == [4, 5, 6, 7, 8]  # min 2 kept
    assert t.snapshot_manager.ids() == [9, 10]
    assert t.maintenance.expire_snapshots(now=FUTURE, retain_min=1, max_deletes=100).snapshots == [9]
    assert open(f"{t.path}/snapshot/EARLIEST").read().strip() == "10"


def test_time_retention_follows_the_next_snapshot(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 6)
    times = {i: t.snapshot(i).time_millis for i in range(1, 7)}
    # snapshot k expires only once snapshot k + 1 was committed before the threshold
    result = t.maintenance.expire_snapshots(retain_min=1, max_deletes=100, older_than=times[4])
    assert result.snapshots == [1, 2]
    result = t.maintenance.expire_snapshots(retain_min=1, max_deletes=100, older_than=times[4] + 1)
    assert result.snapshots == [3]
    when = dt.datetime.fromtimestamp((times[6] + 1) / 1000, dt.timezone.utc).isoformat()
    assert t.maintenance.expire_snapshots(retain_min=1, max_deletes=100, older_than=when).snapshots == [4, 5]


def test_retain_max_expires_regardless_of_age(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 8)
    result = t.maintenance.expire_snapshots(retain_min=1, retain_max=3, max_deletes=100)  # all younger than 1 h
    assert result.snapshots == [1, 2, 3, 4, 5]
    assert t.snapshot_manager.ids() == [6, 7, 8]


def test_consumers_protect_the_snapshots_they_read(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 6)
    os.makedirs(f"{t.path}/consumer")
    with open(f"{t.path}/consumer/consumer-flink-job", "w") as f:
        json.dump({"nextSnapshot": 3}, f)
    assert t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100).snapshots == [1, 2]


def test_never_expires_the_last_snapshot(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 1)
    assert t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE).snapshots == []
    assert t.snapshot_manager.ids() == [1]


def test_empty_table(tmp_path):
    t = make_table(tmp_path)
    assert t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE).snapshots == []


# ---- what gets deleted -----------------------------------------------------------------------------------

def test_expiry_deletes_only_files_nothing_retained_uses(churn):
    t = churn
    expected = snapshot_reads(t)
    tag_files = live_data_paths(t, t.tags.get("mid").snapshot)
    all_before = all_files(t.path)
    ever = set()
    for sid in t.snapshot_manager.ids():
        ever |= live_data_paths(t, t.snapshot(sid))
    result = t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    assert result.snapshots == list(range(1, 9))
    kept = {k: v for k, v in expected.items() if k[0] == "tag" or k[1] >= 9}
    check_all_readable(t, kept)
    live = tag_files | live_data_paths(t, t.snapshot(9)) | live_data_paths(t, t.snapshot(10))
    # exactly the data files no retained snapshot nor the tag reads are gone
    assert set(result.data_files) == ever - live
    assert result.data_files and not (set(result.data_files) & all_files(t.path))
    assert live <= all_files(t.path)
    assert set(result.files) == all_before - all_files(t.path)
    assert result.bytes_freed > 0
    assert not any(p.endswith("snapshot-8") for p in all_files(t.path))
    assert store_file(f"{t.path}/snapshot/EARLIEST").decode().strip() == "9"


def test_tag_files_survive_until_the_tag_goes(churn):
    t = churn
    tag_only = live_data_paths(t, t.tags.get("mid").snapshot) - live_data_paths(t, t.latest_snapshot())
    assert tag_only
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert tag_only <= all_files(t.path)
    assert rows(t.read(tag="mid")) == rows(t.read(tag="mid"))
    result = t.maintenance.delete_tag("mid")
    assert set(result.data_files) == tag_only
    check_all_readable(t)


def test_dry_run_returns_the_plan_and_deletes_nothing(churn):
    t = churn
    before = tree_digest(t.path)
    plan = t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100, dry_run=True)
    assert plan.dry_run and plan.snapshots == list(range(1, 9)) and plan.data_files and plan.bytes_freed
    assert tree_digest(t.path) == before
    done = t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    assert (done.snapshots, sorted(done.files), done.bytes_freed) == \
        (plan.snapshots, sorted(plan.files), plan.bytes_freed)
    d = done.to_dict()
    assert d["files_freed"] == len(done.files) and d["snapshots"] == list(range(1, 9))


def test_manifests_are_read_once_per_expiry(churn, monkeypatch):
    t = churn
    reads: list[str] = []
    real = t.io.read_bytes

    def counting(path):
        if "/manifest/" in path:
            reads.append(path)
        return real(path)

    monkeypatch.setattr(t.io, "read_bytes", counting)
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert reads and len(reads) == len(set(reads))


# ---- the policy: table options plus overrides ---------------------------------------------------------------

def test_table_options_make_the_policy(tmp_path):
    t = make_table(tmp_path, options={"snapshot.num-retained.min": "2", "snapshot.time-retained": "0 ms",
                                      "snapshot.expire.limit": "1"})
    _commits(t, 4)
    assert t.maintenance.expire_snapshots(dry_run=True).snapshots == [1]            # snapshot.expire.limit
    assert t.maintenance.expire_snapshots(max_deletes=10, dry_run=True).snapshots == [1, 2]  # the 2 newest stay


def test_a_policy_and_the_same_arguments_expire_the_same(churn):
    policy = ExpirePolicy.from_options(churn.options(), retain_min=1, older_than=FUTURE, max_deletes=100)
    by_policy = churn.maintenance.expire_snapshots(policy=policy, dry_run=True)
    by_arguments = churn.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100, dry_run=True)
    assert by_policy.snapshots and by_policy.snapshots == by_arguments.snapshots
    # An age before now, as the operator and the command line take it.
    by_age = churn.maintenance.expire_snapshots(retain_min=1, older_than="0 s", max_deletes=100, dry_run=True)
    assert by_age.snapshots == by_arguments.snapshots
    assert churn.maintenance.expire_snapshots(policy=policy, older_than="30 d", dry_run=True).snapshots == []


# ---- bad inputs ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"retain_min": 0}, "retain_min: must be at least 1"),
    ({"retain_min": -3}, "retain_min"),
    ({"retain_min": "many"}, "whole number"),
    ({"retain_min": 1.5}, "whole number"),
    ({"retain_min": True}, "whole number"),
    ({"retain_min": 5, "retain_max": 2}, "retain_max"),
    ({"max_deletes": 0}, "max_deletes"),
    ({"older_than": "yesterday-ish"}, "older_than: expected a duration .* or a point in time"),
    ({"older_than": dt.timedelta(hours=-1)}, "negative"),
    ({"now": "not a time"}, "not a point in time"),
])
def test_bad_arguments_change_nothing(churn, kwargs, match):
    before = tree_digest(churn.path)
    with pytest.raises(InvalidOptionError, match=match):
        churn.maintenance.expire_snapshots(**kwargs)
    assert tree_digest(churn.path) == before


def test_bad_table_options_change_nothing(tmp_path):
    from airflow_paimon.format import Catalog
    t = make_table(tmp_path)
    _commits(t, 3)
    schema_file = f"{t.path}/schema/schema-0"
    doc = json.loads(open(schema_file).read())
    doc["options"]["snapshot.time-retained"] = "forever"
    open(schema_file, "w").write(json.dumps(doc))
    before = tree_digest(t.path)
    with pytest.raises(InvalidOptionError, match="snapshot.time-retained"):
        Catalog(str(tmp_path)).get_table("db.t").maintenance.expire_snapshots()
    assert tree_digest(t.path) == before


def test_tables_with_branches_are_refused(churn):
    os.makedirs(f"{churn.path}/branch/branch-dev/snapshot")
    before = tree_digest(churn.path)
    with pytest.raises(UnsupportedTableError, match="branches"):
        churn.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert tree_digest(churn.path) == before


def test_missing_metadata_of_a_retained_snapshot_stops_everything(churn):
    t = churn
    latest = t.latest_snapshot()
    os.remove(f"{t.path}/manifest/{latest.delta_manifest_list}")
    before = tree_digest(t.path)
    with pytest.raises(Exception, match="missing"):
        t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert tree_digest(t.path) == before


# ---- crash safety ----------------------------------------------------------------------------------------

def test_a_crash_at_any_point_never_loses_live_files(churn, monkeypatch):
    t = churn
    expected = snapshot_reads(t)
    plan = t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100, dry_run=True)
    total = len(plan.files)
    for n in range(0, total + 1, 3):
        fail = FailAfter(monkeypatch, t.io, n)
        try:
            t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
        except FailAfter.Crash:
            pass
        fail.undo()
        # whatever survived the crash is intact: every remaining snapshot and tag reads as before
        check_all_readable(t, expected)
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    t.maintenance.remove_orphan_files(older_than=FUTURE)
    assert t.snapshot_manager.ids() == [9, 10]
    check_all_readable(t, expected)


# ---- tag expiry ------------------------------------------------------------------------------------------

def test_expire_tags_by_retention(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 3)
    t.tags.create("short", snapshot_id=1, time_retained="1 h")
    t.tags.create("long", snapshot_id=2, time_retained="30 d")
    t.tags.create("forever", snapshot_id=3)
    assert t.maintenance.expire_tags().tags == []
    before = tree_digest(t.path)
    plan = t.maintenance.expire_tags(now=dt.datetime.now() + dt.timedelta(hours=2), dry_run=True)
    assert plan.tags == ["short"] and tree_digest(t.path) == before
    assert t.maintenance.expire_tags(now=dt.datetime.now() + dt.timedelta(hours=2)).tags == ["short"]
    assert t.maintenance.expire_tags(now=dt.datetime.now() + dt.timedelta(days=31)).tags == ["long"]
    assert [x.name for x in t.tags.list()] == ["forever"]


def test_expire_periodic_tags_beyond_num_retained_max(tmp_path):
    t = make_table(tmp_path, options={"tag.num-retained-max": "2"})
    _commits(t, 5)
    for i, name in enumerate(["2026-11-18", "2026-11-20", "manual", "2026-11-19", "2026-11-21"]):
        t.tags.create(name, snapshot_id=i + 1)
    result = t.maintenance.expire_tags()
    # the oldest periodic tags (by period, not by snapshot) go; "manual" is not periodic
    assert sorted(result.tags) == ["2026-11-18", "2026-11-19"]
    assert sorted(x.name for x in t.tags.list()) == ["2026-11-20", "2026-11-21", "manual"]


def test_expire_tags_with_bad_options_changes_nothing(tmp_path):
    t = make_table(tmp_path, options={"tag.num-retained-max": "0"})
    _commits(t, 2)
    t.tags.create("2026-11-18")
    before = tree_digest(t.path)
    with pytest.raises(InvalidOptionError, match="tag.num-retained-max"):
        t.maintenance.expire_tags()
    with pytest.raises(InvalidOptionError):
        t.maintenance.expire_tags(now="garbage")
    assert tree_digest(t.path) == before


def test_expire_tags_deletes_files_only_those_tags_used(churn):
    t = churn
    t.tags.create("soon", time_retained="1 h")       # not yet due
    only_mid = live_data_paths(t, t.tags.get("mid").snapshot) - live_data_paths(t, t.latest_snapshot())
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    # make "mid" due: give it a retention that ran out (as a tag made three days ago with 1 d would have)
    from airflow_paimon.format.tags import Tag
    mid = t.tags.get("mid")
    old = Tag(mid.name, mid.snapshot, dt.datetime.now() - dt.timedelta(days=3), dt.timedelta(days=1))
    open(t.tags.path("mid"), "w").write(old.to_json())
    result = t.maintenance.expire_tags()
    assert result.tags == ["mid"]
    assert set(result.data_files) == only_mid
    check_all_readable(t)


def test_metadata_of_expired_snapshots_is_deleted_unless_shared(churn):
    t = churn
    idx = FileIndex(t)
    keep = set()
    for sid in (9, 10):
        keep |= set(idx.metadata(t.snapshot(sid)))
    keep |= set(idx.metadata(t.tags.get("mid").snapshot))
    gone = set()
    for sid in range(1, 9):
        gone |= metadata_paths(t, t.snapshot(sid))
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    existing = all_files(t.path)
    assert keep <= existing
    assert not ((gone - keep) & existing)
    with pytest.raises(SnapshotNotFoundError):
        t.read(snapshot_id=3)


# ---- changelog files ---------------------------------------------------------------------------------------

def _give_changelog(t, sid: int) -> str:
    """Attach a changelog (file + manifest + manifest list) to snapshot `sid`, as changelog-producer=input
    would have written it; returns the changelog file's path."""
    import dataclasses

    import pyarrow as pa

    from airflow_paimon.format.manifest import ADD, ManifestEntry
    from airflow_paimon.format.snapshot import Snapshot
    msg = t.new_write().write_bucket((), 0, pa.table({"id": pa.array([sid], pa.int64()), "p": ["a"],
                                                      "v": pa.array([sid], pa.int64())}), None, 0)
    meta = msg.new_files[0]
    bucket_dir = t.bucket_dir((), 0)
    name = "changelog-" + meta.file_name[len("data-"):]
    os.rename(f"{bucket_dir}/{meta.file_name}", f"{bucket_dir}/{name}")
    meta = dataclasses.replace(meta, file_name=name)
    entry = ManifestEntry(ADD, msg.partition, 0, msg.total_buckets, meta)
    m = t.manifest_io.write_entries([entry], 0, t.partition_stats([msg.partition]))
    lst, size = t.manifest_io.write_list([m])
    snap = dataclasses.replace(t.snapshot(sid), changelog_manifest_list=lst, changelog_manifest_list_size=size,
                               changelog_record_count=1)
    with open(t.snapshot_manager.path(sid), "w") as f:
        f.write(snap.to_json())
    t.snapshot_manager.forget(sid)
    assert isinstance(t.snapshot(sid), Snapshot) and t.snapshot(sid).changelog_manifest_list == lst
    return f"{bucket_dir}/{name}"


def test_changelog_files_of_expired_snapshots_go_and_retained_ones_stay(tmp_path):
    t = make_table(tmp_path)
    _commits(t, 4)
    gone, kept = _give_changelog(t, 2), _give_changelog(t, 4)
    gone_lists = metadata_paths(t, t.snapshot(2))
    result = t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    assert result.snapshots == [1, 2]
    assert result.changelog_files == [gone] and gone not in result.data_files
    existing = all_files(t.path)
    assert gone not in existing and kept in existing
    assert not ({p for p in gone_lists if "manifest-list" in p} - metadata_paths(t, t.snapshot(3))) & existing
    t.maintenance.remove_orphan_files(older_than=FUTURE)
    assert kept in all_files(t.path)
    check_all_readable(t)


def test_progress_is_reported(churn):
    import io

    from airflow_paimon.format.upkeep.progress import tty_progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    report = tty_progress(stream)
    assert report is not None and tty_progress(io.StringIO()) is None
    churn.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100, progress=report)
    text = stream.getvalue()
    assert "deleting expired snapshots: 9/9" in text and "deleting data files" in text


def test_union_of_live_sets_equals_per_snapshot_merges(churn):
    t = churn
    roots = [t.snapshot(i) for i in t.snapshot_manager.ids()] + [x.snapshot for x in t.tags.list()]
    expected = set()
    for s in roots:
        expected |= {e.file.file_name for e in t.file_entries(s)}
    assert FileIndex(t).union_live_names(roots) == expected
    for s in roots:  # and root by root
        assert FileIndex(t).union_live_names([s]) == {e.file.file_name for e in t.file_entries(s)}
