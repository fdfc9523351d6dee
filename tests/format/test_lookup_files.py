"""Local lookup files: lookups answer from an Arrow copy of each data file they look into, exactly as from the file."""

from __future__ import annotations

import gc
import os
import random
import time

import pyarrow as pa
import pytest

from airflow_paimon.format import SchemaChange
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV

from .changelog_helpers import changelog_rows
from .upkeep_helpers import tree_digest

KV = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])


def kv(rows):
    cols = list(zip(*rows)) if rows else [[], [], []]
    return pa.table({"k": pa.array(cols[0], pa.int64()), "p": pa.array(cols[1], pa.string()),
                     "v": pa.array(cols[2], pa.int64())}, schema=KV)


@pytest.fixture
def copies(tmp_path, monkeypatch):
    """The lookup files' directory of this test."""
    directory = tmp_path / "lookup-files"
    monkeypatch.setenv(LOOKUP_DIR_ENV, str(directory))
    return directory


def copy_files(directory):
    return sorted(p for p in directory.rglob("*.arrow"))


def lookup_table(catalog, name="db.t", **options):
    return catalog.create_table(name, KV, primary_keys=["k"],
                                options={"changelog-producer": "lookup", "bucket": "1", **options})


def test_a_lookup_answers_from_the_copy_of_the_one_file_it_looks_into(catalog, copies):
    t = lookup_table(catalog, **{"num-levels": "8"})   # room for each write's own level: no merge rewrites a file
    for start in range(0, 30, 10):
        t.write(kv([(k, "a", k) for k in range(start, start + 10)]))
    snap = t.write(kv([(25, "a", 250)]))
    assert changelog_rows(t, snap) == [("-U", 25, "a", 25), ("+U", 25, "a", 250)]
    made = copy_files(copies)
    named = {f"{e.file.file_name}-{e.file.file_size}.v2.arrow": e.file for e in t.file_entries(snap)}
    assert len(made) == 1 and made[0].name in named
    holder = named[made[0].name]
    assert holder.row_count == 10 and holder.level > 0
    # With the data file gone, the next lookup into it still answers: from its copy.
    path = t.data_file_path((), 0, holder)
    os.rename(path, path + ".away")
    try:
        snap = t.write(kv([(26, "b", 260)]))
    finally:
        os.rename(path + ".away", path)
    assert changelog_rows(t, snap) == [("-U", 26, "a", 26), ("+U", 26, "b", 260)]
    assert copy_files(copies) == made


def test_without_a_directory_no_copy_is_made(catalog, tmp_path, monkeypatch):
    monkeypatch.setenv(LOOKUP_DIR_ENV, "")
    t = lookup_table(catalog)
    t.write(kv([(1, "a", 1), (2, "a", 2)]))
    snap = t.write(kv([(2, "b", 20)]))
    assert changelog_rows(t, snap) == [("-U", 2, "a", 2), ("+U", 2, "b", 20)]
    assert not list(tmp_path.rglob("*.arrow"))


def test_a_damaged_copy_is_made_again(catalog, copies):
    t = lookup_table(catalog)
    t.write(kv([(k, "a", k) for k in range(100)]))
    t.write(kv([(5, "b", 50)]))
    (made,) = copy_files(copies)
    size = made.stat().st_size
    with open(made, "r+b") as f:
        f.truncate(size // 2)
    snap = t.write(kv([(6, "c", 60)]))
    assert changelog_rows(t, snap) == [("-U", 6, "a", 6), ("+U", 6, "c", 60)]
    assert made.stat().st_size == size


def test_copies_follow_renamed_columns(catalog, copies):
    t = lookup_table(catalog)
    t.write(kv([(k, f"p{k}", k) for k in range(20)]))
    t.write(kv([(3, "x", 30)]))
    assert copy_files(copies)
    t.alter(SchemaChange.rename_column("p", "q"))
    t = catalog.get_table("db.t")
    snap = t.write(pa.table({"k": pa.array([4], pa.int64()), "q": ["y"], "v": pa.array([40], pa.int64())}))
    assert changelog_rows(t, snap) == [("-U", 4, "p4", 4), ("+U", 4, "y", 40)]


def test_copies_and_data_files_give_the_same_changelog(warehouse, tmp_path, monkeypatch):
    """The same random writes on two tables, one looking up in copies and one in the data files."""
    from airflow_paimon.format import Catalog
    rng = random.Random(7)
    writes = []
    for _ in range(8):
        keys = rng.sample(range(400), 60)
        writes.append(kv([(k, rng.choice(["a", "b", None]), rng.randrange(5)) for k in keys]))
    results = {}
    for mode in ("copies", "files"):
        monkeypatch.setenv(LOOKUP_DIR_ENV, str(tmp_path / "lookup-files") if mode == "copies" else "")
        catalog = Catalog(f"{warehouse}/{mode}")
        catalog.create_database("db")
        t = catalog.create_table("db.t", KV, primary_keys=["k"],
                                 options={"changelog-producer": "lookup", "bucket": "3"})
        results[mode] = [sorted(changelog_rows(t, t.write(w)), key=repr) for w in writes]
    assert results["copies"] == results["files"]
    assert any(len(rows) > 60 for rows in results["copies"])   # updates gave -U/+U pairs
    made = copy_files(tmp_path / "lookup-files")
    assert len(made) > 3
    # the small-dictionary string column stays a dictionary in the copies, the key columns plain
    for copy in made:
        schema = pa.ipc.open_file(str(copy)).schema
        assert pa.types.is_dictionary(schema.field("p").type)
        assert not any(pa.types.is_dictionary(schema.field(n).type) for n in ("k", "_KEY_k"))


def test_a_key_column_of_few_values_stays_plain_in_the_copies(warehouse, tmp_path, monkeypatch):
    """A composite key whose string part holds few values: searched and joined as it is, never a dictionary."""
    from airflow_paimon.format import Catalog
    rng = random.Random(11)
    writes = [kv([(k, rng.choice("abc"), rng.randrange(5)) for k in rng.sample(range(200), 40)]) for _ in range(6)]
    results = {}
    for mode in ("copies", "files"):
        monkeypatch.setenv(LOOKUP_DIR_ENV, str(tmp_path / "lookup-files") if mode == "copies" else "")
        catalog = Catalog(f"{warehouse}/{mode}")
        catalog.create_database("db")
        t = catalog.create_table("db.t", KV, primary_keys=["p", "k"],
                                 options={"changelog-producer": "lookup", "bucket": "2"})
        results[mode] = [sorted(changelog_rows(t, t.write(w)), key=repr) for w in writes]
    assert results["copies"] == results["files"] and any(len(rows) > 40 for rows in results["copies"])
    made = copy_files(tmp_path / "lookup-files")
    assert made
    for copy in made:
        schema = pa.ipc.open_file(str(copy)).schema
        assert not any(pa.types.is_dictionary(t) for t in schema.types)


def test_copies_unused_for_longer_than_the_retention_are_dropped(catalog, copies):
    t = lookup_table(catalog, **{"lookup.cache-file-retention": "1 h"})
    t.write(kv([(k, "a", k) for k in range(10)]))
    t.write(kv([(1, "b", 10)]))
    (old,) = copy_files(copies)
    hour_ago = time.time() - 3601
    os.utime(old, (hour_ago, hour_ago))
    t.write(kv([(k, "a", k) for k in range(100, 110)]))
    t.write(kv([(101, "b", 1010)]))   # makes a copy of the new file, then drops the stale one
    remaining = copy_files(copies)
    assert old not in remaining and len(remaining) == 1


def test_copies_beyond_the_disk_size_go_least_recently_used_first(catalog, copies):
    t = lookup_table(catalog)
    t.write(kv([(k, "a", k) for k in range(10)]))
    t.write(kv([(1, "b", 10)]))
    (first,) = copy_files(copies)
    earlier = time.time() - 60
    os.utime(first, (earlier, earlier))
    t = lookup_table(catalog, "db.u", **{"lookup.cache-max-disk-size": f"{first.stat().st_size + 10} b"})
    t.write(kv([(k, "a", k) for k in range(10)]))
    t.write(kv([(1, "b", 10)]))
    assert first in copy_files(copies)   # another table's copies: its own directory, its own bound
    made = [p for p in copy_files(copies) if p.parent != first.parent]
    assert len(made) == 1
    t.write(kv([(k, "a", k) for k in range(100, 110)]))
    snap = t.write(kv([(1, "c", 11), (101, "b", 1010)]))
    assert sorted(changelog_rows(t, snap)) == sorted([("-U", 1, "b", 10), ("+U", 1, "c", 11),
                                                      ("-U", 101, "a", 101), ("+U", 101, "b", 1010)])
    assert len([p for p in copy_files(copies) if p.parent != first.parent]) == 1


@pytest.mark.parametrize("option, value", [("lookup.cache-file-retention", "soon"),
                                           ("lookup.cache-max-disk-size", "lots")])
def test_a_bad_lookup_option_is_refused_and_changes_nothing(catalog, option, value):
    t = lookup_table(catalog)
    t.write(kv([(1, "a", 1)]))
    before = tree_digest(t.path)
    with pytest.raises(InvalidOptionError, match=option):
        lookup_table(catalog, "db.u", **{option: value})
    assert tree_digest(t.path) == before
    assert not catalog.table_exists("db.u")


def test_a_diff_answers_from_the_copies_of_the_files_both_ends_share(catalog, copies):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={"bucket": "2"})
    t.write(kv([(k, "a", k) for k in range(200)]))
    t.create_tag("start")
    t.write(kv([(7, "b", 70), (300, "n", 3)]))
    t.create_tag("end")
    got = sorted(t.changes("start", "end", mode="diff").read_all().select(["_change_type", "k", "p", "v"]).to_pylist(),
                 key=repr)
    assert got == sorted([{"_change_type": "update_preimage", "k": 7, "p": "a", "v": 7},
                          {"_change_type": "update_postimage", "k": 7, "p": "b", "v": 70},
                          {"_change_type": "insert", "k": 300, "p": "n", "v": 3}], key=repr)
    shared = {f"{e.file.file_name}-{e.file.file_size}.v2.arrow" for e in t.file_entries(t.tags.get("start").snapshot)}
    made = {p.name for p in copy_files(copies)}
    assert made and made <= shared


def test_a_copy_unused_for_longer_than_the_retention_is_made_again_before_use(catalog, copies):
    t = lookup_table(catalog, **{"lookup.cache-file-retention": "1 h"})
    t.write(kv([(k, "a", k) for k in range(10)]))
    t.write(kv([(1, "b", 10)]))
    (copy,) = copy_files(copies)
    first = copy.stat().st_ino
    t.write(kv([(2, "b", 20)]))
    assert copy.stat().st_ino == first           # within the retention: used as it is
    hour_ago = time.time() - 3601
    os.utime(copy, (hour_ago, hour_ago))
    snap = t.write(kv([(3, "b", 30)]))
    assert changelog_rows(t, snap) == [("-U", 3, "a", 3), ("+U", 3, "b", 30)]
    assert copy.stat().st_ino != first           # expired: made again from the data file


def test_a_copy_records_that_its_keys_ascend_and_unsorted_keys_are_still_found(catalog, copies):
    """A copy made from a data file notes that its only key column strictly increases, so searches in it skip the
    order check; keys that do not ascend (a file no writer should make) are found by membership instead."""
    from airflow_paimon.format.kernels import SortedIntegers
    from airflow_paimon.format.key_reads import positions_of_keys
    from airflow_paimon.format.lookup_files import keys_ascending

    t = lookup_table(catalog)
    t.write(kv([(k, "a", k) for k in range(20)]))
    t.write(kv([(3, "a", 30)]))
    (made,) = copy_files(copies)
    assert keys_ascending(pa.ipc.open_file(pa.memory_map(str(made))).read_all())
    unsorted = pa.table({"k": pa.array([9, 2, 7, 4], pa.int64())})
    wanted = pa.table({"k": pa.array([4, 7], pa.int64())})
    assert positions_of_keys(unsorted, wanted, ["k"]).tolist() == [2, 3]
    ordered = unsorted.sort_by("k")
    index = SortedIntegers(ordered.column("k").to_numpy())
    assert positions_of_keys(ordered, wanted, ["k"], index).tolist() == [1, 2]


def _the_copy_and_its_file(t, copies):
    (made,) = copy_files(copies)
    (entry,) = [e for e in t.file_entries(t.latest_snapshot()) if made.name.startswith(e.file.file_name)]
    return made, t.data_file_path((), 0, entry.file), entry.file


def _open_files() -> set[str]:
    """What this process's file descriptors refer to."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:   # closed meanwhile
            pass
    return found


def test_a_process_maps_a_copy_once_and_holds_no_file_open(catalog, copies):
    """Later lookups of the process answer from the mapping the first one made, as Paimon keeps its lookup files
    open for the writer's life; a mapping keeps no file descriptor."""
    from airflow_paimon.format.lookup_files import LookupFiles

    t = lookup_table(catalog)
    t.write(kv([(k, "a", k) for k in range(100)]))
    t.write(kv([(5, "b", 50)]))   # makes the copy
    made, path, meta = _the_copy_and_its_file(t, copies)
    mapped = LookupFiles(t).open(path, meta)
    assert mapped is not None and mapped.keys is not None
    assert LookupFiles(t).open(path, meta) is mapped
    # no descriptor of this process is the copy's (counting all of them would count other tests' threads too)
    assert str(made.resolve()) not in _open_files()
    snap = t.write(kv([(6, "c", 60)]))
    assert changelog_rows(t, snap) == [("-U", 6, "a", 6), ("+U", 6, "c", 60)]
    assert LookupFiles(t).open(path, meta) is mapped and copy_files(copies) == [made]


def test_a_mapping_is_dropped_with_its_expired_or_pruned_copy(catalog, copies):
    """A copy found expired is made again and mapped anew; one pruned is unmapped, so its disk space is freed."""
    from airflow_paimon.format.lookup_files import LookupFiles

    t = lookup_table(catalog, **{"lookup.cache-file-retention": "1 h"})
    t.write(kv([(k, "a", k) for k in range(100)]))
    t.write(kv([(5, "b", 50)]))
    made, path, meta = _the_copy_and_its_file(t, copies)
    files = LookupFiles(t)
    mapped = files.open(path, meta)
    hour_ago = time.time() - 3601
    os.utime(made, (hour_ago, hour_ago))
    remade = files.open(path, meta)
    assert files.built == 1 and remade is not mapped
    assert files.open(path, meta) is not mapped   # the copy made again, mapped anew
    os.utime(made, (hour_ago, hour_ago))
    del mapped, remade
    files.prune()
    assert copy_files(copies) == []
    gc.collect()   # the test's own references may sit in collectable cycles; the cache's would not
    with open("/proc/self/maps") as maps:
        assert str(made) not in maps.read()   # unmapped: the deleted file's space is free
    again = LookupFiles(t)
    assert again.open(path, meta) is not None and again.built == 1


@pytest.mark.parametrize("key_type", [pa.int32(), pa.int16(), pa.date32(), pa.timestamp("us"),
                                      pa.timestamp("ms", tz="UTC")], ids=str)
def test_keys_of_every_integer_and_temporal_type_are_found_in_the_copies(catalog, copies, key_type):
    """Keys stored as integers or times are searched through the copies' sampled index: updates of keys before,
    inside and at the end of its blocks, and new keys between and beyond the stored ones."""
    import datetime

    def key(i):
        if pa.types.is_date(key_type):
            return datetime.date(2020, 1, 1) + datetime.timedelta(days=i)
        if pa.types.is_timestamp(key_type):
            tz = datetime.timezone.utc if key_type.tz else None
            return datetime.datetime(2020, 1, 1, tzinfo=tz) + datetime.timedelta(seconds=i)
        return i

    schema = pa.schema([("k", key_type), ("v", pa.int64())])
    t = catalog.create_table("db.typed", schema, primary_keys=["k"],
                             options={"changelog-producer": "lookup", "bucket": "1"})

    def rows(pairs):
        return pa.table({"k": pa.array([key(i) for i, _ in pairs], key_type),
                         "v": pa.array([v for _, v in pairs], pa.int64())})

    t.write(rows([(i, i) for i in range(0, 600, 2)]))          # 300 even keys: several 64-key blocks
    t.write(rows([(2, 20)]))                                    # makes the copy
    assert copy_files(copies)
    changed = [0, 126, 128, 298, 598]
    added = [1, 127, 599, 700]
    snap = t.write(rows([(i, 1000 + i) for i in changed + added]))
    expected = sorted([("-U", key(i), i) for i in changed] + [("+U", key(i), 1000 + i) for i in changed] +
                      [("+I", key(i), 1000 + i) for i in added], key=lambda r: (r[1], r[0] != "-U"))
    got = changelog_rows(t, snap, ["k", "v"])
    assert sorted(got, key=lambda r: (r[1], r[0] != "-U")) == expected


def test_mappings_of_copies_another_process_replaced_or_deleted_are_dropped(catalog, copies, monkeypatch):
    """A copy replaced since it was mapped is mapped anew; one deleted is unmapped by the next sweep, so the
    process does not keep its disk space."""
    import shutil

    from airflow_paimon.format import lookup_files
    from airflow_paimon.format.lookup_files import LookupFiles

    t = lookup_table(catalog)
    t.write(kv([(k, "a", k) for k in range(100)]))
    t.write(kv([(5, "b", 50)]))
    made, path, meta = _the_copy_and_its_file(t, copies)
    mapped = LookupFiles(t).open(path, meta)
    twin = made.with_name("twin")
    shutil.copyfile(made, twin)
    os.replace(twin, made)                                  # another process made the copy again
    remapped = LookupFiles(t).open(path, meta)
    assert remapped is not mapped and remapped is not None
    assert remapped.data.equals(mapped.data)
    del mapped
    made.unlink()                                           # another process pruned it
    monkeypatch.setattr(lookup_files, "SWEEP_SECONDS", -1.0)
    del remapped
    t.write(kv([(k, "c", k) for k in range(200, 210)]))
    t.write(kv([(201, "d", 2010)]))                         # makes the copy of that file
    snap = t.write(kv([(202, "d", 2020)]))                  # maps it: the sweep runs
    assert changelog_rows(t, snap) == [("-U", 202, "c", 202), ("+U", 202, "d", 2020)]
    gc.collect()   # the test's own references may sit in collectable cycles; the cache's would not
    with open("/proc/self/maps") as maps:
        assert str(made) not in maps.read()
