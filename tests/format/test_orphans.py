"""Orphan-file removal: only unreferenced files older than the safety age, never schema/, hints, snapshot or tag
files, consumers or branches."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from airflow_paimon.format import InvalidOptionError, UnsupportedTableError

from .upkeep_helpers import (
    FUTURE,
    all_files,
    check_all_readable,
    judged_files,
    make_table,
    put_file,
    referenced_names,
    set_mtime,
    snapshot_reads,
    store_exists,
    tree_digest,
    upsert,
)

OLD = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=3)


def _backdate(path: str) -> None:
    """Make a file three days old. An object store dates an object at its upload and cannot be told otherwise:
    there the cleanup is asked for files older than a future instant instead (`_old_enough`)."""
    if "://" not in path:
        set_mtime(path, OLD)


def _old_enough(table) -> dict:
    """The cleanup's age argument that makes the planted files old enough: the default on a local disk, where
    they are backdated; a future instant on an object store."""
    return {"older_than": FUTURE} if "://" in table.path else {}


@pytest.fixture
def table(warehouse):
    t = make_table(warehouse, partitioned=True)
    upsert(t, range(5), 1, p="x")
    upsert(t, range(3, 8), 2, p="y")
    t.tags.create("t2")
    upsert(t, range(5), 3, p="x")
    t.maintenance.compact()
    return t


def _plant(table) -> dict[str, str]:
    """Unreferenced files of every kind a crash or a failed writer leaves behind, all three days old."""
    paths = {
        "data": f"{table.path}/p=x/bucket-0/data-00000000-dead-beef-0000-000000000000-0.parquet",
        "changelog": f"{table.path}/p=y/bucket-1/changelog-11111111-dead-beef-0000-000000000000-0.parquet",
        "new-partition": f"{table.path}/p=zz/bucket-0/data-22222222-dead-beef-0000-000000000000-0.parquet",
        "manifest": f"{table.path}/manifest/manifest-33333333-dead-beef-0000-000000000000-0",
        "manifest-list": f"{table.path}/manifest/manifest-list-44444444-dead-beef-0000-000000000000-0",
        "index": f"{table.path}/index/index-55555555-0",
        "statistics": f"{table.path}/statistics/stat-66666666-0",
        "snapshot-tmp": f"{table.path}/snapshot/.snapshot-9.0123456789abcdef0123456789abcdef.tmp",
        "tag-tmp": f"{table.path}/tag/.tag-x.0123456789abcdef0123456789abcdef.tmp",
    }
    for p in paths.values():
        put_file(p, b"orphan")
        _backdate(p)
    return paths


def _protected(table) -> dict[str, str]:
    """Files orphan cleanup must never judge, even unreferenced and old."""
    paths = {
        "schema": f"{table.path}/schema/schema-7",
        "consumer": f"{table.path}/consumer/consumer-job",
        "top-level": f"{table.path}/README",
        "odd-dir": f"{table.path}/p=x/notes.txt",
    }
    for p in paths.values():
        put_file(p, b"keep")
        _backdate(p)
    for hint in ("EARLIEST", "LATEST"):
        _backdate(f"{table.path}/snapshot/{hint}")
    return paths


def test_removes_old_unreferenced_files_only(table):
    reads = snapshot_reads(table)
    planted = _plant(table)
    protected = _protected(table)
    before = all_files(table.path)
    result = table.maintenance.remove_orphan_files(**_old_enough(table))   # default safety age: one day
    assert sorted(result.paths) == sorted(planted.values())
    assert result.bytes_freed == 6 * len(planted)
    after = all_files(table.path)
    assert before - after == set(planted.values())
    assert set(protected.values()) <= after
    assert not store_exists(f"{table.path}/p=zz")  # emptied partition directories go too
    check_all_readable(table, reads)


def test_young_files_are_kept_by_default(table):
    young = f"{table.path}/p=x/bucket-0/data-77777777-0000-0000-0000-000000000000-0.parquet"
    put_file(young, b"being written")
    assert table.maintenance.remove_orphan_files().files == []
    assert store_exists(young)
    # older_than in the future makes everything unreferenced eligible
    assert table.maintenance.remove_orphan_files(older_than=FUTURE).paths == [young]


def test_dry_run_lists_and_deletes_nothing(table):
    planted = _plant(table)
    before = tree_digest(table.path)
    plan = table.maintenance.remove_orphan_files(dry_run=True)
    assert sorted(plan.paths) == sorted(planted.values()) and plan.dry_run
    assert tree_digest(table.path) == before
    assert plan.to_dict()["files_freed"] == len(planted)


def test_leaves_exactly_the_referenced_files(table):
    table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    _plant(table)
    table.maintenance.remove_orphan_files(older_than=FUTURE)
    names = {p.rsplit("/", 1)[-1] for p in judged_files(table)}
    assert names == referenced_names(table) & names
    assert names <= referenced_names(table)
    check_all_readable(table)


@pytest.mark.parametrize("older_than", ["last tuesday", dt.timedelta(days=-1), object()])
def test_bad_older_than_changes_nothing(table, older_than):
    _plant(table)
    before = tree_digest(table.path)
    with pytest.raises(InvalidOptionError):
        table.maintenance.remove_orphan_files(older_than=older_than)
    assert tree_digest(table.path) == before


def test_branches_are_refused(table):
    _plant(table)
    os.makedirs(f"{table.path}/branch/branch-dev/schema")
    before = tree_digest(table.path)
    with pytest.raises(UnsupportedTableError, match="branches"):
        table.maintenance.remove_orphan_files(older_than=FUTURE)
    assert tree_digest(table.path) == before


def test_a_corrupt_snapshot_file_stops_everything(table):
    _plant(table)
    with open(f"{table.path}/snapshot/snapshot-999", "w") as f:
        f.write("{not json")
    before = tree_digest(table.path)
    with pytest.raises(Exception, match="snapshot-999"):
        table.maintenance.remove_orphan_files(older_than=FUTURE)
    assert tree_digest(table.path) == before


def test_a_missing_manifest_stops_everything(table):
    _plant(table)
    latest = table.latest_snapshot()
    os.remove(f"{table.path}/manifest/{latest.base_manifest_list}")
    before = tree_digest(table.path)
    with pytest.raises(Exception, match="missing"):
        table.maintenance.remove_orphan_files(older_than=FUTURE)
    assert tree_digest(table.path) == before


def test_a_file_uri_warehouse_is_cleaned_as_a_plain_path_is(tmp_path):
    """A warehouse given as ``file:///path`` (as Paimon catalogs accept it): the listing names files as the table
    does, so an old stray file is found and deleted, and the live files stay."""
    import pyarrow as pa

    from airflow_paimon.format import Catalog

    cat = Catalog(f"file://{tmp_path}")
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([pa.field("id", pa.int64())]), primary_keys=["id"],
                         options={"bucket": "1"})
    t.write(pa.table({"id": pa.array([1, 2], pa.int64())}))
    stray = f"{t.bucket_dir((), 0)}/data-stray.parquet"
    assert stray.startswith("file://")
    with open(stray.removeprefix("file://"), "wb") as f:
        f.write(b"x")
    set_mtime(stray.removeprefix("file://"), OLD)
    result = t.maintenance.remove_orphan_files()
    assert result.paths == [stray] and result.files_deleted == 1
    assert not os.path.exists(stray.removeprefix("file://"))
    assert t.read().column("id").to_pylist() == [1, 2]
