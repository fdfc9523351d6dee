"""Rows that arrive already in key order skip the sort and the gather: the files must be the same as for the
same rows in any other order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_paimon.format import Catalog


def _rows(ids: np.ndarray) -> pa.Table:
    return pa.table({"id": ids, "name": pa.array([f"n-{i}" for i in ids]), "v": ids.astype(np.float64) / 3})


def _stored(tmp_path, name: str, data: pa.Table, buckets: int) -> tuple[list, list[pa.Table]]:
    cat = Catalog(str(tmp_path / name))
    cat.create_database("d")
    table = cat.create_table("d.t", data.schema, primary_keys=["id"], options={"bucket": str(buckets)})
    table.write(data)
    entries = sorted(table.file_entries(table.latest_snapshot()), key=lambda e: e.bucket)
    files = [
        pq.read_table(table.io.fs_path(table.data_file_path(e.partition, e.bucket, e.file)), filesystem=table.io.fs)
        for e in entries
    ]
    # What a file's metadata says apart from its name, size and creation time.
    metas = [dataclasses.replace(e.file, file_name="", file_size=0, creation_time_ms=0) for e in entries]
    return metas, files


def test_sorted_input_writes_the_same_files_as_shuffled_input(tmp_path):
    ids = np.arange(-500, 1500, dtype=np.int64)
    shuffled = ids.copy()
    np.random.default_rng(3).shuffle(shuffled)
    for buckets in (1, 3):
        sorted_meta, sorted_files = _stored(tmp_path, f"sorted-{buckets}", _rows(ids), buckets)
        shuffled_meta, shuffled_files = _stored(tmp_path, f"shuffled-{buckets}", _rows(shuffled), buckets)
        assert sorted_meta == shuffled_meta
        assert [f.equals(g) for f, g in zip(sorted_files, shuffled_files)] == [True] * len(sorted_files)
        assert len(sorted_files) == buckets


def test_sorted_input_with_a_repeated_key_keeps_the_later_row(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("d")
    data = pa.table({"id": pa.array([1, 2, 2, 3], pa.int64()), "v": ["a", "b", "c", "d"]})
    table = cat.create_table("d.t", data.schema, primary_keys=["id"], options={"bucket": "1"})
    table.write(data)
    assert table.read().sort_by("id").column("v").to_pylist() == ["a", "c", "d"]
