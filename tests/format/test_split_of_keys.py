"""`read_split_of_keys` gives, for the keys asked for, exactly the rows a whole read of the split gives: random
upserts, deletes and compactions of tables with one or two key columns, partitions, a `sequence.field`,
`ignore-delete` or deletion vectors; with lookup files and without. Its cost follows the keys: files whose key
range holds none of them are not opened."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog, key_reads
from airflow_paimon.format.data_file import DELETE
from airflow_paimon.format.key_reads import read_split_of_keys
from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV
from airflow_paimon.format.read import read_split
from airflow_paimon.format.schema import SEQUENCE_NUMBER
from tests.sizes import scaled

KINDS = ["plain", "two-keys", "partitioned", "sequence-field", "ignore-delete", "deletion-vectors"]
STEP = st.one_of(
    st.tuples(st.just("put"), st.dictionaries(st.integers(0, 30), st.integers(0, 5), min_size=1, max_size=10)),
    st.tuples(st.just("del"), st.sets(st.integers(0, 30), min_size=1, max_size=5)),
    st.tuples(st.just("compact"), st.none()),
)


def _create(cat: Catalog, kind: str):
    fields = [("k", pa.int64()), ("j", pa.string()), ("p", pa.int32()), ("s", pa.int64()), ("v", pa.string())]
    options = {"bucket": "2"}
    keys, partitions = ["k"], []
    if kind == "two-keys":
        keys = ["k", "j"]
    elif kind == "partitioned":
        keys, partitions = ["p", "k"], ["p"]
    elif kind == "sequence-field":
        options["sequence.field"] = "s"
    elif kind == "ignore-delete":
        options["ignore-delete"] = "true"
    elif kind == "deletion-vectors":
        options["deletion-vectors.enabled"] = "true"
    return cat.create_table(f"db.{kind.replace('-', '_')}", pa.schema(fields), primary_keys=keys,
                            partition_keys=partitions, options=options)


def _rows(table, keys: list[int], version: int) -> pa.Table:
    return pa.table({"k": keys, "j": [f"j{k % 3}" for k in keys], "p": [k % 2 for k in keys],
                     "s": [(k * 7 + version) % 5 for k in keys], "v": [f"v{version}-{k}" for k in keys]},
                    schema=table.arrow_schema())


def _apply(table, step, version: int) -> None:
    kind, arg = step
    if kind == "put":
        data = _rows(table, sorted(arg), version)
        table.write(data.set_column(4, "v", pa.array([f"v{version}-{k}-{arg[k]}" for k in sorted(arg)])))
    elif kind == "del":
        keys = sorted(arg)
        if table.core_options.ignore_delete:   # refused by delete(); its writers drop these -D rows
            table.write(_rows(table, keys, version), kinds=pa.array([DELETE] * len(keys), pa.int8()))
        else:
            table.delete(_rows(table, keys, version).select(table.primary_keys))
    else:
        table.maintenance.compact()


def _sorted(rows: pa.Table, keys: list[str]) -> pa.Table:
    return rows.sort_by([(k, "ascending") for k in keys])


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), steps=st.lists(STEP, min_size=1, max_size=7),
       asked=st.sets(st.integers(0, 34), max_size=12), copies=st.booleans())
def test_the_rows_of_some_keys_are_those_of_the_whole_read(kind, steps, asked, copies):
    root = tempfile.mkdtemp()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(LOOKUP_DIR_ENV, f"{root}/lookup-files" if copies else "")
        try:
            cat = Catalog(f"{root}/warehouse")
            cat.create_database("db")
            table = _create(cat, kind)
            for version, step in enumerate(steps):
                _apply(table, step, version)
            trimmed = table.schema().trimmed_primary_keys
            columns = ["k", "j", "p", "s", "v"] + ([SEQUENCE_NUMBER] if kind != "deletion-vectors" else [])
            for split in table.plan():
                whole = read_split(table, split, columns)
                wanted = _rows(table, sorted(asked), 0).select(trimmed)
                got = read_split_of_keys(table, split, columns, wanted)
                expected = whole.join(wanted.group_by(trimmed).aggregate([]), trimmed, join_type="left semi")
                assert _sorted(got, trimmed).equals(_sorted(expected.select(columns), trimmed))
        finally:
            shutil.rmtree(root, ignore_errors=True)


def test_files_that_cannot_hold_a_key_are_not_opened(tmp_path, monkeypatch):
    monkeypatch.setenv(LOOKUP_DIR_ENV, str(tmp_path / "lookup-files"))
    cat = Catalog(str(tmp_path / "warehouse"))
    cat.create_database("db")
    table = _create(cat, "plain")
    for low in range(0, 40, 10):   # four files of disjoint key ranges in each bucket
        table.write(_rows(table, list(range(low, low + 10)), low))
    opened: list[str] = []
    real = key_reads.LookupFiles.open

    def spy(self, path, meta):
        opened.append(meta.file_name)
        return real(self, path, meta)

    monkeypatch.setattr(key_reads.LookupFiles, "open", spy)
    for split in table.plan():
        got = read_split_of_keys(table, split, ["k", "v"], pa.table({"k": pa.array([12, 13], pa.int64())}))
        assert set(got.column("k").to_pylist()) <= {12, 13}
    assert 1 <= len(opened) <= 2   # the file of the range [10, 19] of the buckets holding 12 and 13
    assert all(read_split_of_keys(table, split, ["k"], pa.table({"k": pa.array([99], pa.int64())})).num_rows == 0
               for split in table.plan())


def test_an_append_table_is_refused(tmp_path):
    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    table = cat.create_table("db.a", pa.schema([("k", pa.int64())]))
    table.write(pa.table({"k": [1, 2]}))
    (split,) = table.plan()
    with pytest.raises(ValueError, match="has no primary key"):
        read_split_of_keys(table, split, ["k"], pa.table({"k": [1]}))


@pytest.mark.parametrize("copies", [True, False])
def test_rows_a_deletion_vector_deletes_are_not_read(tmp_path, monkeypatch, copies):
    monkeypatch.setenv(LOOKUP_DIR_ENV, str(tmp_path / "lookup-files") if copies else "")
    cat = Catalog(str(tmp_path / "warehouse"))
    cat.create_database("db")
    table = _create(cat, "deletion-vectors")
    table.write(_rows(table, list(range(20)), 0))
    table.maintenance.compact()
    table.write(_rows(table, [3, 4, 5], 1))
    table.delete(pa.table({"k": pa.array([6, 7], pa.int64())}))
    assert any(split.deletion_files is not None for split in table.plan())
    wanted = pa.table({"k": pa.array([3, 4, 5, 6, 7, 8], pa.int64())})
    got = pa.concat_tables([read_split_of_keys(table, split, ["k", "v"], wanted) for split in table.plan()])
    assert sorted(got.to_pylist(), key=lambda r: r["k"]) == \
        [{"k": k, "v": f"v1-{k}"} for k in (3, 4, 5)] + [{"k": 8, "v": "v0-8"}]


@pytest.mark.parametrize("key_type", [pa.int64(), pa.int32(), pa.string()])
def test_may_hold_keys_tests_the_file_key_range_against_every_key(tmp_path, key_type):
    """A file holding keys 100..199 may hold a key set that reaches into that range, never one wholly outside it,
    for integer keys (compared in numpy) as for others."""
    def key(i: int):
        return f"{i:04d}" if pa.types.is_string(key_type) else i

    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("k", key_type), ("v", pa.int64())]), primary_keys=["k"],
                         options={"bucket": "1"})
    t.write(pa.table({"k": pa.array([key(i) for i in range(100, 200)], key_type), "v": pa.array(range(100))}))
    (entry,) = t.file_entries(t.latest_snapshot())

    def holds(keys: list[int]) -> bool:
        return key_reads.may_hold_keys(t, entry.file, pa.array([key(i) for i in keys], key_type))

    assert holds([150]) and holds([0, 199]) and holds([100, 5000]) and holds([3, 120, 900])
    assert not holds([0, 99]) and not holds([200, 5000]) and not holds([])
