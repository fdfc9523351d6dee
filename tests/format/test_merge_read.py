"""Merge-on-read's row gathering: a few runs of consecutive rows become zero-copy slices, anything else a take;
both give exactly the rows `Table.take` gives, and a merge of two overlapping commits reads back what a model
of the newest version per key says. Files of many row groups: the groups whose every row a newer file rewrote or
deleted are never decoded, and what is read still equals the model."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog, SchemaChange, data_file
from airflow_paimon.format.evolution import DataFileReader
from airflow_paimon.format.read import MAX_SLICED_RUNS, take_rows
from tests.sizes import scaled


def _table(n: int) -> pa.Table:
    first = pa.table({"k": np.arange(n // 2, dtype=np.int64), "s": [f"v{i}" for i in range(n // 2)]})
    second = pa.table({"k": np.arange(n // 2, n, dtype=np.int64), "s": [f"w{i}" for i in range(n // 2, n)]})
    return pa.concat_tables([first, second])   # two chunks, as two files' rows are


@settings(max_examples=scaled(100), deadline=None)
@given(st.lists(st.integers(0, 59), max_size=80))
def test_take_rows_gives_the_rows_take_gives(picks):
    data = _table(60)
    rows = np.array(picks, dtype=np.int64)
    assert take_rows(data, rows).equals(data.take(pa.array(rows, pa.int64())))


def test_few_runs_are_sliced_without_copying():
    data = _table(1000)
    rows = np.concatenate([np.arange(0, 300), np.arange(450, 1000)])   # two runs, the second across both chunks
    out = take_rows(data, rows)
    assert out.equals(data.take(pa.array(rows)))
    buffers = {b.address for chunk in data.column("s").chunks for b in chunk.buffers() if b is not None}
    assert all(b.address in buffers for chunk in out.column("s").chunks for b in chunk.buffers()
               if b is not None and b.size)


def test_many_runs_are_gathered_into_one_chunk():
    data = _table(1000)
    rows = np.arange(0, 1000, 2)   # 500 runs of one row
    assert len(rows) > MAX_SLICED_RUNS
    out = take_rows(data, rows)
    assert out.equals(data.take(pa.array(rows)))
    assert out.column("s").num_chunks == 1


def test_merge_of_overlapping_commits_keeps_the_newest_version(catalog):
    rng = np.random.default_rng(3)
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = catalog.create_table("db.t", schema, primary_keys=["id"], options={"bucket": "3"})
    first = np.arange(2000, dtype=np.int64)
    rng.shuffle(first)
    table.write(pa.table({"id": first, "v": [f"a{i}" for i in first]}, schema=schema))
    # A range of keys updated (long runs survive in the first files) and a few scattered ones.
    second = np.concatenate([np.arange(1500, 2500), rng.choice(1500, 40, replace=False)]).astype(np.int64)
    table.write(pa.table({"id": second, "v": [f"b{i}" for i in second]}, schema=schema))
    expected = {int(i): f"a{i}" for i in first} | {int(i): f"b{i}" for i in second}
    got = table.read()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == expected
    assert got.num_rows == len(expected)


SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(start: int, stop: int, prefix: str) -> pa.Table:
    return pa.table({"id": np.arange(start, stop, dtype=np.int64), "v": [f"{prefix}{i}" for i in range(start, stop)]},
                    schema=SCHEMA)


def _one_bucket(catalog, monkeypatch, group_rows: int):
    """A one-bucket table of `SCHEMA` whose files are written in row groups of `group_rows` rows."""
    monkeypatch.setattr(data_file, "ROW_GROUP_ROWS", group_rows)
    return catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})


def _decoded_groups(monkeypatch) -> list[tuple[str, list[int] | None, tuple[str, ...]]]:
    """Records each read of a data file's columns: (file name, row groups asked for, columns)."""
    calls: list[tuple[str, list[int] | None, tuple[str, ...]]] = []
    stored = DataFileReader.stored

    def spy(self, names, groups=None, rows=None):
        calls.append((self.path.rsplit("/", 1)[-1], groups, tuple(names)))
        return stored(self, names, groups, rows)

    monkeypatch.setattr(DataFileReader, "stored", spy)
    return calls


def test_row_groups_a_newer_file_rewrote_entirely_are_never_decoded(catalog, monkeypatch):
    table = _one_bucket(catalog, monkeypatch, 100)
    table.write(_rows(0, 1000, "a"))
    # keys 450-1099: groups 5-9 of the first file (rows 500-999) are rewritten whole, group 4 only in part
    table.write(_rows(450, 1100, "b"))
    older = next(e.file.file_name for e in table.file_entries(table.latest_snapshot()) if e.file.row_count == 1000)
    calls = _decoded_groups(monkeypatch)
    got = table.read()
    assert got.column("id").to_pylist() == list(range(1100))
    assert got.column("v").to_pylist() == [f"a{i}" for i in range(450)] + [f"b{i}" for i in range(450, 1100)]
    values_of_older = [groups for name, groups, names in calls if name == older and "v" in names]
    assert values_of_older == [[0, 1, 2, 3, 4]]
    # deleting keys spares their groups too
    table.delete(pa.table({"id": np.arange(0, 400, dtype=np.int64)}))
    calls.clear()
    got = table.read()
    assert got.column("id").to_pylist() == list(range(400, 1100))
    assert [groups for name, groups, names in calls if name == older and "v" in names] == [[4]]


def test_columns_added_later_read_as_null_from_the_groups_read(catalog, monkeypatch):
    table = _one_bucket(catalog, monkeypatch, 3)
    table.write(_rows(0, 20, "a"))
    table.alter(SchemaChange.add_column("w", "INT"))
    later = pa.table({"id": np.arange(10, 30, dtype=np.int64), "v": [f"b{i}" for i in range(10, 30)],
                      "w": pa.array(range(10, 30), pa.int32())})
    table.write(later)
    got = table.read()
    assert got.column("id").to_pylist() == list(range(30))
    assert got.column("w").to_pylist() == [None] * 10 + list(range(10, 30))
    assert got.column("v").to_pylist() == [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10, 30)]
    assert table.read(columns=["w"]).column("w").to_pylist() == [None] * 10 + list(range(10, 30))


@settings(max_examples=scaled(60), deadline=None)
@given(group_rows=st.integers(1, 6),
       commits=st.lists(st.lists(st.tuples(st.integers(0, 40), st.booleans()), min_size=1, max_size=30),
                        min_size=2, max_size=5),
       columns=st.sampled_from([None, ["id"], ["v"], ["v", "id"]]))
def test_merge_of_many_row_groups_matches_a_model(tmp_path_factory, group_rows, commits, columns):
    """Commits of upserts and deletes (True: delete) into files of `group_rows`-row groups read back as the
    model's newest value per key, whatever groups the merge skips."""
    data_file.ROW_GROUP_ROWS, saved = group_rows, data_file.ROW_GROUP_ROWS
    try:
        catalog = Catalog(str(tmp_path_factory.mktemp("wh")))
        catalog.create_database("db")
        schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
        table = catalog.create_table("db.t", schema, primary_keys=["id"], options={"bucket": "2"})
        model: dict[int, str] = {}
        for number, commit in enumerate(commits):
            latest = {key: delete for key, delete in commit}   # one change per key and commit
            upserts = sorted(k for k, delete in latest.items() if not delete)
            deletes = sorted(k for k, delete in latest.items() if delete)
            if upserts:
                table.write(pa.table({"id": pa.array(upserts, pa.int64()), "v": [f"c{number}-{k}" for k in upserts]},
                                     schema=schema))
            if deletes:
                table.delete(pa.table({"id": pa.array(deletes, pa.int64())}))
            model.update({k: f"c{number}-{k}" for k in upserts})
            for k in deletes:
                model.pop(k, None)
        got = table.read(columns=columns).to_pylist()
        expected = [{"id": k, "v": v} for k, v in sorted(model.items())]
        if columns is not None:
            expected = [{c: row[c] for c in columns} for row in expected]
        key = (lambda r: r["id"]) if columns is None or "id" in columns else (lambda r: r["v"])
        assert sorted(got, key=key) == sorted(expected, key=key)
    finally:
        data_file.ROW_GROUP_ROWS = saved


def test_an_empty_row_group_left_by_another_writer_is_merged_past(catalog, monkeypatch):
    table = _one_bucket(catalog, monkeypatch, 10)
    table.write(_rows(0, 50, "a"))
    table.write(_rows(25, 60, "b"))
    for entry in table.file_entries(table.latest_snapshot()):   # each file: the same rows, then a group of none
        path = table.data_file_path((), 0, entry.file)
        rows = pq.read_table(path)
        with pq.ParquetWriter(path, pq.read_schema(path)) as writer:
            writer.write_table(rows, row_group_size=10)
            writer.write_table(rows.slice(0, 0))
        meta = pq.ParquetFile(path).metadata
        assert meta.row_group(meta.num_row_groups - 1).num_rows == 0
    got = table.read()
    assert got.column("id").to_pylist() == list(range(60))
    assert got.column("v").to_pylist() == [f"a{i}" for i in range(25)] + [f"b{i}" for i in range(25, 60)]
