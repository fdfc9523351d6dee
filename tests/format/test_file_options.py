"""Paimon's options for the files a write makes: `data-file.prefix`, `changelog-file.prefix`,
`changelog-file.compression` are honoured by every writer (writes, lookup level-ups, compactions, the changelog
producers); a `changelog-file.format` or `changelog-file.compression` this library does not write refuses the
write of a table that produces changelog, before any byte is written."""

from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.errors import UnsupportedTableError

from .upkeep_helpers import tree_digest

KV = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"k": [k for k, _ in pairs], "v": [v for _, v in pairs]}, schema=KV)


def _files(table) -> list[str]:
    return sorted(f for _, _, names in os.walk(table.path) for f in names if f.endswith(".parquet"))


def _codec(table, name: str) -> str:
    path = next(os.path.join(d, name) for d, _, names in os.walk(table.path) if name in names)
    metadata = pq.ParquetFile(path).metadata
    return {metadata.row_group(g).column(c).compression for g in range(metadata.num_row_groups)
            for c in range(metadata.num_columns)}.pop()


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_prefixes_and_changelog_compression_are_honoured(catalog, producer):
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "bucket": "2", "changelog-producer": producer, "data-file.prefix": "d-", "changelog-file.prefix": "cl-",
        "changelog-file.compression": "snappy"})
    t.write(_rows((1, "a"), (2, "b"), (3, "c")))
    for i in range(5):   # enough writes for the lookup producer's level-ups to merge files of levels above 0
        t.write(_rows((1, f"a{i}"), (2, f"b{i}")))
    t.write(_rows((1, "a2"), (4, "d")))
    t.maintenance.compact()
    files = _files(t)
    assert all(f.startswith(("d-", "cl-")) for f in files), files
    data = [f for f in files if f.startswith("d-")]
    changelog = [f for f in files if f.startswith("cl-")]
    assert data and changelog
    assert {_codec(t, f) for f in data} == {"ZSTD"}
    assert {_codec(t, f) for f in changelog} == {"SNAPPY"}
    listed = {e.file.file_name for s in t.snapshots() for e in t.changelog_entries(s)}
    assert listed == set(changelog)
    feed = t.changes(0, None, mode="changelog").read_all()
    assert ("insert", 4, "d") in [(r["_change_type"], r["k"], r["v"]) for r in feed.to_pylist()]
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "a2"}, {"k": 2, "v": "b4"}, {"k": 3, "v": "c"}, {"k": 4, "v": "d"}]


def test_an_append_table_names_its_files_by_the_data_file_prefix(catalog):
    t = catalog.create_table("db.log", KV, options={"data-file.prefix": "part-"})
    t.write(_rows((1, "a")))
    t.write(_rows((2, "b")))
    t.maintenance.compact()
    assert _files(t) and all(f.startswith("part-") for f in _files(t))
    assert t.read().num_rows == 2


@pytest.mark.parametrize("option, value, named", [
    ("changelog-file.format", "avro", "changelog-file.format is 'avro'"),
    ("changelog-file.compression", "zip", "changelog-file.compression 'zip'"),
])
def test_a_changelog_file_this_library_cannot_write_refuses_the_write(catalog, option, value, named):
    with pytest.raises(UnsupportedTableError, match=named):
        catalog.create_table("db.u", KV, primary_keys=["k"], options={"changelog-producer": "lookup", option: value})
    assert not catalog.table_exists("db.u")
    # a table another writer made, or altered (as Paimon's ALTER TABLE SET does)
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={"changelog-producer": "lookup"})
    t.write(_rows((1, "a")))
    schema = t.schema()
    assert t.schema_manager.create(dataclasses.replace(schema, id=schema.id + 1,
                                                       options={**schema.options, option: value}))
    t = catalog.get_table("db.t")
    before = tree_digest(t.path)
    with pytest.raises(UnsupportedTableError, match=named):
        t.write(_rows((1, "b")))
    assert tree_digest(t.path) == before
    assert t.read().to_pylist() == [{"k": 1, "v": "a"}]
    # without a changelog producer the option names files that are never written
    plain = catalog.create_table("db.plain", KV, primary_keys=["k"], options={option: value})
    plain.write(_rows((1, "a")))
    assert plain.read().num_rows == 1


PKV = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def test_data_files_live_in_the_data_file_path_directory(catalog):
    t = catalog.create_table("db.t", PKV, primary_keys=["k", "p"], partition_keys=["p"], options={
        "bucket": "2", "data-file.path-directory": "./data//files/", "changelog-producer": "lookup",
        "deletion-vectors.enabled": "false"})
    for i in range(4):
        t.write(pa.table({"k": [1, 2, i + 3], "p": ["a", "b", "a"], "v": [f"v{i}"] * 3}, schema=PKV))
    parquet = [os.path.relpath(os.path.join(d, f), t.path) for d, _, names in os.walk(t.path) for f in names
               if f.endswith(".parquet")]
    assert parquet and all(p.startswith("data/files/p=") for p in parquet), parquet
    assert t.read().num_rows == 6
    assert t.changes(0, None, mode="changelog").read_all().num_rows > 0
    # expiry deletes the files only expired snapshots used (here, those a full compaction replaced), where they are
    t.maintenance.compact()
    result = t.maintenance.expire_snapshots(retain_min=1, retain_max=1)
    assert result.data_files and all(f.startswith(f"{t.path}/data/files/p=") for f in result.data_files)
    assert not any(os.path.exists(f) for f in result.data_files)
    assert t.read().num_rows == 6
    # orphan cleanup judges the files of the data folder, and only those
    bucket = os.path.dirname(os.path.join(t.path, parquet[0]))
    stray = os.path.join(bucket, "data-stray-0.parquet")
    outside = os.path.join(t.path, "p=a", "bucket-0", "data-outside-0.parquet")
    for path in (stray, outside):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").write(b"x")
    found = t.maintenance.remove_orphan_files(older_than="2999-01-01T00:00:00Z")
    assert [f.path for f in found.files] == [stray]
    assert os.path.exists(outside) and t.read().num_rows == 6


@pytest.mark.parametrize("directory", ["../elsewhere", "/abs/data", "s3://bucket/data", ""])
def test_a_data_folder_outside_the_table_is_refused(catalog, directory):
    t = catalog.create_table("db.t", PKV, primary_keys=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "p": ["a"], "v": ["x"]}, schema=PKV))
    schema = t.schema()
    assert t.schema_manager.create(dataclasses.replace(schema, id=schema.id + 1, options={
        **schema.options, "data-file.path-directory": directory}))
    t = catalog.get_table("db.t")
    before = tree_digest(t.path)
    for action in (t.read, lambda: t.write(pa.table({"k": [2], "p": ["a"], "v": ["y"]}, schema=PKV))):
        with pytest.raises(UnsupportedTableError, match="data-file.path-directory .* is not a folder inside the table"):
            action()
    assert tree_digest(t.path) == before
    assert [s.id for s in t.snapshots()] == [1]


DV = pa.schema([("k", pa.int64()), ("v", pa.string()), ("n", pa.int32())])


def test_default_values_fill_nulls_at_read_as_paimon_reads_them(catalog):
    """`fields.<name>.default-value`: a NULL of that column reads as the value (after merging, before the filter,
    in reads and change feeds alike), while the files keep the NULL, as Paimon's reader does."""
    import pyarrow.compute as pc

    t = catalog.create_table("db.t", DV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "input", "fields.v.default-value": "none given",
        "fields.n.default-value": "7"})
    t.write(pa.table({"k": [1, 2], "v": [None, None], "n": [None, None]}, schema=DV))   # a file of NULLs only
    t.write(pa.table({"k": [2, 3], "v": ["b", None], "n": [2, None]}, schema=DV))
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "none given", "n": 7}, {"k": 2, "v": "b", "n": 2}, {"k": 3, "v": "none given", "n": 7}]
    # the filter sees the default, and no file is skipped because its statistics say NULL
    assert t.read(filter=pc.field("v") == "none given", columns=["k"]).column("k").to_pylist() in ([1, 3], [3, 1])
    assert t.read(snapshot_id=1, filter=pc.field("n") == 7).num_rows == 2
    # a file whose statistics put v in ['b', 'b'] still holds a row that reads as the default
    one = catalog.create_table("db.one", DV, options={"fields.v.default-value": "none given",
                                                       "fields.n.default-value": "7"})
    one.write(pa.table({"k": [1, 2], "v": ["b", None], "n": [1, None]}, schema=DV))
    assert one.read(filter=pc.field("v") == "none given").column("k").to_pylist() == [2]
    assert one.read(filter=pc.field("n") == 7).column("k").to_pylist() == [2]
    for mode in ("changelog", "delta"):
        feed = t.changes(0, None, mode=mode).read_all().to_pylist()
        assert {(r["k"], r["v"], r["n"]) for r in feed if r["_commit_version"] == 1} == {
            (1, "none given", 7), (2, "none given", 7)}, mode
    stored = [pq.read_table(os.path.join(d, f)) for d, _, names in os.walk(t.path) for f in names
              if f.endswith(".parquet")]
    assert all(table.column("v").null_count > 0 for table in stored)


def test_a_default_value_of_the_wrong_type_is_a_clear_error(catalog):
    from airflow_paimon.format.errors import InvalidOptionError

    t = catalog.create_table("db.t", DV, primary_keys=["k"], options={"bucket": "1", "fields.n.default-value": "x"})
    t.write(pa.table({"k": [1], "v": ["a"], "n": [None]}, schema=DV))
    with pytest.raises(InvalidOptionError, match=r"fields.n.default-value: 'x' is not a int32 value"):
        t.read()


def _long_strings(keys: range) -> pa.Table:
    """Nearly unique strings (written plain) repeating long pieces far apart: a higher zstd level finds them."""
    import numpy as np

    rng = np.random.default_rng(7)
    pool = ["".join(chr(c) for c in rng.integers(97, 123, 48)) for _ in range(300)]
    return pa.table({"k": list(keys), "v": [f"{pool[i % 300]}{pool[(i * 7) % 293]}{i}" for i in keys]}, schema=KV)


def _sizes(table, prefix: str) -> list[int]:
    return sorted(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(table.path) for f in names
                  if f.startswith(prefix) and f.endswith(".parquet"))


def test_the_zstd_level_is_that_of_file_compression_zstd_level(catalog):
    """`file.compression.zstd-level` (Paimon's default 1) compresses every data and changelog file: the same rows
    make smaller files at level 19, and the tables read the same."""
    tables = {level: catalog.create_table(f"db.z{level}", KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "lookup", "file.compression.zstd-level": str(level)})
        for level in (1, 19)}
    ends = {}
    for level, t in tables.items():
        first = t.write(_long_strings(range(3000)))
        second = t.write(_long_strings(range(0, 3000, 2)))     # a changelog of -U and +U rows, its +U spliced
        ends[level] = (first.id, second.id)
    for prefix in ("data-", "changelog-"):
        low, high = _sizes(tables[1], prefix), _sizes(tables[19], prefix)
        assert len(low) == len(high) >= 1
        assert all(h < 0.9 * lo for lo, h in zip(low, high)), (prefix, low, high)
    assert tables[1].read().equals(tables[19].read())
    assert ends[1] == ends[19]
    assert tables[1].changes(*ends[1]).read_all().drop_columns(["_commit_timestamp"]).equals(
        tables[19].changes(*ends[19]).read_all().drop_columns(["_commit_timestamp"]))
    default = catalog.create_table("db.default", KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "lookup"})
    default.write(_long_strings(range(3000)))
    default.write(_long_strings(range(0, 3000, 2)))
    for prefix in ("data-", "changelog-"):     # Paimon's default level is 1
        assert _sizes(default, prefix) == _sizes(tables[1], prefix)


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_file_compression_per_level_compresses_each_level_by_its_codec(catalog, producer):
    """`file.compression.per.level`: a primary-key table's data file written at a level takes that level's codec,
    the others `file.compression`; a file moved up by metadata keeps the codec it was written with (Paimon
    rewrites such a file only when the levels' formats differ); changelog files take `changelog-file.compression`
    or `file.compression`, whatever the level; an append table's files ignore the option, as in Paimon."""
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": producer, "file.compression.per.level": "0:snappy, 5:gzip"})
    first = t.write(_rows((1, "a"), (2, "b")))
    second = t.write(_rows((1, "a2"), (3, "c")))
    written = {e.file.file_name: e.file.level for e in t.file_entries(t.latest_snapshot())}
    # lookup writes move their files up by metadata: still the codec of level 0
    assert {_codec(t, f) for f in written} == {"SNAPPY"}, written
    assert {lvl > 0 for lvl in written.values()} == {producer == "lookup"}
    if producer == "lookup":
        changelog = {e.file.file_name for s in t.snapshots() for e in t.changelog_entries(s)}
        assert changelog and {_codec(t, f) for f in changelog} == {"ZSTD"}
        feed = t.changes(first.id, second.id).read_all().to_pylist()
        assert sorted((r["_change_type"], r["k"], r["v"]) for r in feed) == [
            ("insert", 3, "c"), ("update_postimage", 1, "a2"), ("update_preimage", 1, "a")]
    t.maintenance.compact()     # a full compaction writes level 5
    top = [e.file for e in t.file_entries(t.latest_snapshot())]
    assert [f.level for f in top] == [5] and _codec(t, top[0].file_name) == "GZIP"
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "a2"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    log = catalog.create_table("db.log", KV, options={"file.compression.per.level": "0:snappy"})
    log.write(_rows((1, "a")))
    assert {_codec(log, f) for f in _files(log)} == {"ZSTD"}


@pytest.mark.parametrize("option, value, named", [
    ("file.compression.per.level", "zero:lz4", "file.compression.per.level: 'zero:lz4' is not 'level:value'"),
    ("file.compression.per.level", "0:", "file.compression.per.level: '0:' is not 'level:value'"),
    ("file.format.per.level", "0", "file.format.per.level: '0' is not 'level:value'"),
    ("file.compression.zstd-level", "high", "file.compression.zstd-level"),
])
def test_a_malformed_file_option_is_refused_when_the_table_is_created(catalog, option, value, named):
    from airflow_paimon.format.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match=named):
        catalog.create_table("db.bad", KV, primary_keys=["k"], options={option: value})
    assert not catalog.table_exists("db.bad")
