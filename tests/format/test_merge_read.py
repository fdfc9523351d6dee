"""Merge-on-read's row gathering: a few runs of consecutive rows become zero-copy slices, anything else a take;
both give exactly the rows `Table.take` gives, and a merge of two overlapping commits reads back what a model
of the newest version per key says."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

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
