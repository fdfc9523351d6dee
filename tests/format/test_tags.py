"""Tags: creation (latest, snapshot id, time), names, idempotence, replace, rename, delete with cleanup, and
time travel to tags."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from airflow_paimon.format import InvalidOptionError, SnapshotNotFoundError, TagNotFoundError
from airflow_paimon.format.tag_file import java_duration_string
from airflow_paimon.format.tags import TagAlreadyExistsError
from airflow_paimon.format.values import tag_name

from .upkeep_helpers import (
    FUTURE,
    all_files,
    check_all_readable,
    delete,
    live_data_paths,
    make_table,
    rows,
    snapshot_reads,
    store_file,
    tree_digest,
    upsert,
)


@pytest.fixture
def table(warehouse):
    t = make_table(warehouse)
    upsert(t, [1, 2], 1)        # snapshot 1
    upsert(t, [2, 3], 2)        # snapshot 2
    delete(t, [1])              # snapshot 3
    return t


def _millis(s) -> int:
    return s.time_millis


# ---- creation ---------------------------------------------------------------------------------------

def test_create_from_latest_writes_the_snapshot_json(table):
    tag = table.tags.create("nightly")
    assert tag.snapshot_id == 3
    path = f"{table.path}/tag/tag-nightly"
    doc = json.loads(store_file(path))
    snap = json.loads(store_file(f"{table.path}/snapshot/snapshot-3"))
    assert doc == snap  # no retention: exactly the snapshot JSON, no tag fields (readable by Paimon <= 0.7)
    assert "tagCreateTime" not in doc and "tagTimeRetained" not in doc
    assert rows(table.read(tag="nightly")) == rows(table.read())


def test_create_from_snapshot_id_and_time(table):
    assert table.tags.create("s1", snapshot_id=1).snapshot_id == 1
    s2 = table.snapshot(2)
    assert table.tags.create("t2", as_of=s2.time_millis).snapshot_id == 2
    assert table.tags.create("t2b", as_of=s2.time_millis + 0).snapshot_id == 2
    when = dt.datetime.fromtimestamp(s2.time_millis / 1000, dt.timezone.utc)
    assert table.tags.create("t2c", as_of=when).snapshot_id == 2
    assert table.tags.create("t-before-3", as_of=table.snapshot(3).time_millis - 1).snapshot_id == 2
    assert rows(table.read(tag="s1")) == [(1, "a", 1), (2, "a", 1)]


def test_retention_fields_as_paimon_writes_them(table):
    before = dt.datetime.now().replace(microsecond=0)
    tag = table.tags.create("kept", time_retained="7d")
    doc = json.loads(open(f"{table.path}/tag/tag-kept").read())
    assert doc["tagTimeRetained"] == 7 * 86400.0
    assert isinstance(doc["tagCreateTime"], list) and len(doc["tagCreateTime"]) == 7
    assert tag.time_retained == dt.timedelta(days=7)
    assert before <= tag.create_time <= dt.datetime.now()
    assert tag.expires_at == tag.create_time + dt.timedelta(days=7)
    stripped = {k: v for k, v in doc.items() if not k.startswith("tag")}
    assert stripped == json.loads(open(f"{table.path}/snapshot/snapshot-3").read())


def test_default_retention_from_table_option(tmp_path):
    t = make_table(tmp_path, options={"tag.default-time-retained": "12 h"})
    upsert(t, [1], 1)
    assert t.tags.create("x").time_retained == dt.timedelta(hours=12)
    assert t.tags.create("y", time_retained=dt.timedelta(days=2)).time_retained == dt.timedelta(days=2)


def test_create_is_idempotent_on_the_same_snapshot(table):
    first = table.tags.create("d", snapshot_id=2, time_retained="1d")
    before = tree_digest(table.path)
    again = table.tags.create("d", snapshot_id=2)
    assert again == first
    assert tree_digest(table.path) == before


def test_create_on_another_snapshot_is_an_error_unless_replace(table):
    table.tags.create("d", snapshot_id=2)
    before = tree_digest(table.path)
    with pytest.raises(TagAlreadyExistsError, match="already exists on snapshot 2"):
        table.tags.create("d", snapshot_id=3)
    assert tree_digest(table.path) == before
    moved = table.tags.create("d", snapshot_id=3, replace=True)
    assert moved.snapshot_id == 3
    assert table.tags.get("d").snapshot_id == 3


def test_replace_cleans_files_only_the_old_tag_used(tmp_path):
    t = make_table(tmp_path)
    upsert(t, range(10), 1)
    upsert(t, range(5, 12), 1)
    t.tags.create("old")             # snapshot 2: two level-0 files per bucket
    t.maintenance.compact()          # snapshot 3: each bucket rewritten as one top-level file
    old_files = live_data_paths(t, t.snapshot(2)) - live_data_paths(t, t.snapshot(3))
    assert old_files
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert old_files <= all_files(t.path)  # the tag keeps them
    t.tags.create("keeper", snapshot_id=2)   # another tag on the same snapshot
    t.tags.replace("old")                    # -> latest
    assert old_files <= all_files(t.path)    # still used by "keeper"
    t.tags.replace("keeper")
    assert not (old_files & all_files(t.path))
    check_all_readable(t)


@pytest.mark.parametrize("name", ["", "   ", "\t", "123", "007", "-5", "+5", " 42 ", "a/b", "/abs", "a\\b",
                                  "..", "a..b", "../snapshot/snapshot-1", "x\x00y", "line\nbreak", "tab\tbed",
                                  "bell\x07", "del\x7f", "a" * 256])
def test_bad_tag_names_are_rejected_and_nothing_is_written(table, name):
    before = tree_digest(table.path)
    with pytest.raises(InvalidOptionError):
        table.tags.create(name)
    assert tree_digest(table.path) == before
    assert not os.path.exists(f"{table.path}/tag") or not os.listdir(f"{table.path}/tag")


def test_name_length_limits(table):
    from airflow_paimon.format.tag_file import MAX_LOCAL_TAG_NAME_BYTES
    assert table.tags.create("a" * MAX_LOCAL_TAG_NAME_BYTES).snapshot_id == 3
    assert tag_name("a" * 255)  # the general limit; a local filesystem holds fewer bytes
    before = tree_digest(table.path)
    for name in ("b" * (MAX_LOCAL_TAG_NAME_BYTES + 1), "é" * 107, "c" * 256):
        with pytest.raises(InvalidOptionError, match="long"):
            table.tags.create(name)
    assert tree_digest(table.path) == before


@pytest.mark.parametrize("name", ["2026-11-20", "v1.2", "release_1", "Ünïcode", "1a", "a b"])
def test_good_tag_names(table, name):
    assert tag_name(name) == name
    assert table.tags.create(name).name == name
    assert table.tags.get(name).snapshot_id == 3


@pytest.mark.parametrize("kwargs, error", [
    ({"snapshot_id": 99}, SnapshotNotFoundError),
    ({"snapshot_id": "x"}, InvalidOptionError),
    ({"snapshot_id": 1, "as_of": 5}, InvalidOptionError),
    ({"as_of": "1999-01-01"}, SnapshotNotFoundError),
    ({"time_retained": "soon"}, InvalidOptionError),
    ({"time_retained": "0 s"}, InvalidOptionError),
    ({"time_retained": 5}, InvalidOptionError),
])
def test_bad_create_inputs_change_nothing(table, kwargs, error):
    before = tree_digest(table.path)
    with pytest.raises(error):
        table.tags.create("x", **kwargs)
    assert tree_digest(table.path) == before


def test_create_on_empty_table_is_an_error(tmp_path):
    t = make_table(tmp_path)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot"):
        t.tags.create("x")


def test_create_from_an_expired_snapshot_id_uses_the_tag_holding_it(table):
    table.tags.create("keep1", snapshot_id=1)
    table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert table.snapshot_manager.ids() == [3]
    assert table.tags.create("again", snapshot_id=1).snapshot == table.tags.get("keep1").snapshot
    with pytest.raises(SnapshotNotFoundError, match="no tag holds it"):
        table.tags.create("gone", snapshot_id=2)


def test_as_of_after_expiry_is_exact_or_an_error(table):
    s1, s2, s3 = (table.snapshot(i) for i in (1, 2, 3))
    table.tags.create("keep2", snapshot_id=2)
    table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)   # only snapshot 3 remains
    # snapshot 2 (tagged) is the latest at or before s3 - 1, provably: snapshot 3 (retained) came later
    assert table.tags.create("exact", as_of=s3.time_millis - 1).snapshot_id == 2
    # before snapshot 2: snapshot 1 expired untagged, so no exact answer
    with pytest.raises(SnapshotNotFoundError):
        table.tags.create("unknown", as_of=s2.time_millis - 1)


# ---- listing, rename ------------------------------------------------------------------------------------

def test_list_get_and_missing(table):
    table.tags.create("b", snapshot_id=1)
    table.tags.create("a", snapshot_id=2)
    table.tags.create("c", snapshot_id=2)
    assert [t.name for t in table.tags.list()] == ["b", "a", "c"]
    with pytest.raises(TagNotFoundError, match="existing tags: 'a', 'b', 'c'"):
        table.tags.get("zz")


def test_rename(table):
    table.tags.create("old", snapshot_id=2, time_retained="1d")
    text = open(f"{table.path}/tag/tag-old").read()
    tag = table.tags.rename("old", "new")
    assert tag.name == "new" and tag.snapshot_id == 2 and tag.time_retained == dt.timedelta(days=1)
    assert not table.tags.exists("old")
    assert open(f"{table.path}/tag/tag-new").read() == text


@pytest.mark.parametrize("old, new, error", [
    ("missing", "x", TagNotFoundError),
    ("t1", "t2", TagAlreadyExistsError),
    ("t1", "12", InvalidOptionError),
    ("t1", "a/b", InvalidOptionError),
    ("t1", "", InvalidOptionError),
])
def test_bad_renames_change_nothing(table, old, new, error):
    table.tags.create("t1", snapshot_id=1)
    table.tags.create("t2", snapshot_id=2)
    before = tree_digest(table.path)
    with pytest.raises(error):
        table.tags.rename(old, new)
    assert tree_digest(table.path) == before


# ---- delete -------------------------------------------------------------------------------------------

def test_delete_removes_files_only_that_tag_used(warehouse):
    t = make_table(warehouse)
    upsert(t, range(10), 1)         # 1
    upsert(t, range(5, 15), 2)      # 2
    t.tags.create("first", snapshot_id=1)
    t.tags.create("second")         # on 2
    t.maintenance.compact()         # 3: files of 1 and 2 replaced
    upsert(t, [100], 3)             # 4
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert t.snapshot_manager.ids() == [4]
    files1, files2 = live_data_paths(t, t.tags.get("first").snapshot), live_data_paths(t, t.tags.get("second").snapshot)
    latest = live_data_paths(t, t.latest_snapshot())
    shared = files1 & files2
    assert shared and (files2 - files1)
    expected = snapshot_reads(t)
    result = t.maintenance.delete_tag("second")
    assert result.tags == ["second"]
    gone = files2 - files1 - latest
    assert set(result.data_files) == gone
    existing = all_files(t.path)
    assert not (gone & existing)
    assert files1 <= existing and latest <= existing
    del expected[("tag", "second")]
    check_all_readable(t, expected)
    result = t.maintenance.delete_tag("first")
    assert set(result.data_files) == files1 - latest
    check_all_readable(t)


def test_delete_tag_of_a_retained_snapshot_deletes_only_the_tag_file(table):
    table.tags.create("x", snapshot_id=2)
    before = tree_digest(table.path)
    result = table.maintenance.delete_tag("x")
    assert result.data_files == [] and result.metadata_files == [f"{table.path}/tag/tag-x"]
    after = tree_digest(table.path)
    assert set(before) - set(after) == {"tag/tag-x"}


def test_delete_dry_run_changes_nothing(tmp_path):
    t = make_table(tmp_path)
    upsert(t, [1], 1)
    t.tags.create("x")
    t.maintenance.compact()
    upsert(t, [1], 2)
    t.maintenance.compact()
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    before = tree_digest(t.path)
    plan = t.maintenance.delete_tag("x", dry_run=True)
    assert plan.dry_run and plan.tags == ["x"] and plan.data_files
    assert tree_digest(t.path) == before
    done = t.maintenance.delete_tag("x")
    assert done.data_files == plan.data_files and done.bytes_freed == plan.bytes_freed


@pytest.mark.parametrize("name, error", [("nope", TagNotFoundError), ("../x", InvalidOptionError),
                                         ("", InvalidOptionError)])
def test_delete_bad_tag_changes_nothing(table, name, error):
    table.tags.create("t", snapshot_id=1)
    before = tree_digest(table.path)
    with pytest.raises(error):
        table.maintenance.delete_tag(name)
    assert tree_digest(table.path) == before


# ---- time travel ------------------------------------------------------------------------------------

def test_read_tag_and_as_of(table):
    s = [table.snapshot(i) for i in (1, 2, 3)]
    table.tags.create("two", snapshot_id=2)
    assert rows(table.read(tag="two")) == [(1, "a", 1), (2, "a", 2), (3, "a", 2)]
    assert rows(table.read(as_of=s[0].time_millis)) == [(1, "a", 1), (2, "a", 1)]
    assert rows(table.read(as_of=s[2].time_millis - 1)) == rows(table.read(snapshot_id=2))
    iso = dt.datetime.fromtimestamp(s[2].time_millis / 1000, dt.timezone.utc).isoformat()
    assert rows(table.read(as_of=iso)) == rows(table.read())
    with pytest.raises(TagNotFoundError):
        table.read(tag="nope")
    with pytest.raises(SnapshotNotFoundError, match="its first commit"):
        table.read(as_of=s[0].time_millis - 1)


def test_as_of_after_expiry_names_the_tag_or_reads_it_when_asked(table):
    s2 = table.snapshot(2)
    table.tags.create("two", snapshot_id=2)
    upsert(table, [50], 5)
    table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert table.snapshot_manager.ids() == [4]
    # snapshot 2 expired and snapshot 3 is unknown: the tag may be older than what was current then
    with pytest.raises(SnapshotNotFoundError, match="closest tag is 'two'"):
        table.read(as_of=s2.time_millis + 1)
    assert rows(table.read(as_of=s2.time_millis + 1, closest_tag=True)) == rows(table.read(tag="two"))
    with pytest.raises(SnapshotNotFoundError, match="have expired: the oldest known is snapshot 2"):
        table.read(as_of=s2.time_millis - 1)


def test_java_duration_strings():
    assert java_duration_string(dt.timedelta(days=1)) == "PT24H"
    assert java_duration_string(dt.timedelta(hours=1, minutes=30)) == "PT1H30M"
    assert java_duration_string(dt.timedelta(seconds=0.5)) == "PT0.5S"
    assert java_duration_string(dt.timedelta(0)) == "PT0S"
    assert java_duration_string(dt.timedelta(days=7, seconds=1)) == "PT168H1S"


def test_replace_on_the_same_snapshot_updates_the_retention(table):
    table.tags.create("r", snapshot_id=2, time_retained="1 d")
    assert table.tags.create("r", snapshot_id=2, time_retained="3 d").time_retained == dt.timedelta(days=1)
    assert table.tags.create("r", snapshot_id=2, time_retained="3 d", replace=True).time_retained == \
        dt.timedelta(days=3)
