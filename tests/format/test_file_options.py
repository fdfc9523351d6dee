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
