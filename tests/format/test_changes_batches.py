"""A change feed streams each file it reads batch by batch: a reader holds one batch and the row group it comes
from, never a whole file, however many rows one commit wrote into one bucket."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format.changes.rows import BATCH_ROWS
from airflow_paimon.format.data_file import ROW_GROUP_ROWS
from airflow_paimon.format.evolution import DataFileReader, FileColumns
from airflow_paimon.format.fileio import FileIO
from airflow_paimon.format.schema_change import SchemaChange

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
# more rows than one row group holds, so that the file has several row groups and each several batches
N = ROW_GROUP_ROWS + BATCH_ROWS + 1_000


def rows(ids: np.ndarray) -> pa.Table:
    text = pa.array([f"value-{i:012d}" for i in ids.tolist()])
    return pa.table({"id": pa.array(ids, pa.int64()), "v": text}, schema=SCHEMA)


def test_a_file_of_several_row_groups_streams_in_batches(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"],
                             options={"bucket": "1", "changelog-producer": "input"})
    t.write(rows(np.random.default_rng(7).permutation(N)))
    for mode in ("changelog", "delta"):
        sizes, ids = [], []
        for batch in t.changes(0, 1, mode=mode):
            sizes.append(batch.num_rows)
            ids.extend(batch.column("id").to_pylist())
            assert set(batch.column("_change_type").to_pylist()) == {"insert"}
        assert max(sizes) <= BATCH_ROWS and len(sizes) >= 3, sizes
        assert ids == list(range(N)), mode   # every row once, in the file's key order


def test_reading_a_large_file_holds_a_batch_not_the_file(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"],
                             options={"bucket": "1", "changelog-producer": "input"})
    t.write(rows(np.arange(3 * N)))
    whole = t.changes(0, 1, mode="changelog").read_all().nbytes
    gc.collect()
    base, peak, seen = pa.total_allocated_bytes(), 0, 0
    for batch in t.changes(0, 1, mode="changelog"):
        peak = max(peak, pa.total_allocated_bytes() - base)
        seen += batch.num_rows
        del batch
    assert seen == 3 * N
    # the whole file read at once would hold all of `whole` (and more) while its first batch is handed out
    assert peak < whole / 3, (peak, whole)


def test_the_deletes_of_an_append_table_are_found_in_every_batch(catalog):
    t = catalog.create_table("db.a", SCHEMA, options={"deletion-vectors.enabled": "true"})
    t.write(rows(np.arange(N)))                                  # one file, several batches
    gone = [0, 100, BATCH_ROWS - 1, BATCH_ROWS, ROW_GROUP_ROWS - 1, ROW_GROUP_ROWS, N - 1]
    t.delete(pa.table({"id": pa.array(gone, pa.int64())}))
    got = t.changes(1, 2, mode="delta").read_all()
    assert got.column("id").to_pylist() == gone                  # in the file's order, each once
    assert set(got.column("_change_type").to_pylist()) == {"delete"}
    assert got.column("v").to_pylist() == [f"value-{i:012d}" for i in gone]


def test_a_column_added_after_the_file_was_written_reads_as_nulls(catalog):
    t = catalog.create_table("db.a", SCHEMA)
    t.write(rows(np.arange(5)))
    t.alter(SchemaChange.add_column("w", "INT"))
    got = t.changes(0, 1, mode="delta", columns=["w"]).read_all()
    assert got.num_rows == 5
    assert got.column("w").to_pylist() == [None] * 5


def test_the_deletes_of_an_append_table_read_only_the_row_groups_that_hold_them(catalog):
    t = catalog.create_table("db.a", SCHEMA, options={"deletion-vectors.enabled": "true"})
    t.write(rows(np.arange(N)))                                  # one file, two row groups
    (entry,) = t.file_entries(t.latest_snapshot())
    path = t.data_file_path((), entry.bucket, entry.file)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)   # the first row group's `v`
    assert pq.ParquetFile(path).metadata.num_row_groups == 2
    t.delete(pa.table({"id": pa.array([N - 1], pa.int64())}))  # a row of the second row group
    # damage the first row group's pages: a read of that group now fails, a read of the second does not
    with open(path, "r+b") as f:
        f.seek(min(o for o in (chunk.dictionary_page_offset, chunk.data_page_offset) if o is not None))
        f.write(b"\xff" * chunk.total_compressed_size)
    with pytest.raises(OSError):
        t.changes(0, 1, mode="delta").read_all()
    got = t.changes(1, 2, mode="delta").read_all()
    assert got.column("id").to_pylist() == [N - 1]
    assert got.column("_change_type").to_pylist() == ["delete"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 300), group_rows=st.integers(1, 60), batch_rows=st.integers(1, 70), data=st.data())
def test_batches_are_the_row_groups_asked_for_in_order_with_their_positions(tmp_path, n, group_rows, batch_rows,
                                                                            data):
    """Any file, row-group size, batch size and choice of row groups: the batches are exactly the rows of those
    groups, in file order, none larger than asked, each with the position of its first row in the file."""
    path = str(tmp_path / "f.parquet")
    table = pa.table({"a": pa.array(range(n), pa.int64()), "s": [f"x{i % 5}" for i in range(n)]})
    pq.write_table(table, path, row_group_size=group_rows)
    sizes = [pq.ParquetFile(path).metadata.row_group(g).num_rows for g in range(pq.ParquetFile(path).num_row_groups)]
    groups = data.draw(st.none() | st.lists(st.sampled_from(range(len(sizes))), unique=True).map(sorted)
                       if sizes else st.none())
    columns = FileColumns(("a", "s", "new"), ("a", "s", None))   # "new": added after the file was written
    target = pa.schema([("a", pa.int64()), ("s", pa.string()), ("new", pa.int32())])
    with DataFileReader(FileIO(str(tmp_path)), path) as reader:
        got = list(reader.batches(columns, target, batch_rows, groups))
    starts = [sum(sizes[:g]) for g in range(len(sizes))]
    chosen = range(len(sizes)) if groups is None else groups
    expected = [i for g in chosen for i in range(starts[g], starts[g] + sizes[g])]
    assert [i for _, b in got for i in b.column("a").to_pylist()] == expected
    for first, batch in got:
        assert 0 < batch.num_rows <= batch_rows
        assert batch.column("a")[0].as_py() == first
        assert batch.column("s").to_pylist() == [f"x{i % 5}" for i in range(first, first + batch.num_rows)]
        assert batch.column("new").null_count == batch.num_rows
        assert batch.schema == target
