"""`read_split` returns `_SEQUENCE_NUMBER` when asked for it (a merge's before-images carry the version they show),
also where merge-on-read itself needs the sequence numbers (several files of a string key)."""

from __future__ import annotations

import pyarrow as pa

from airflow_paimon.format import Catalog
from airflow_paimon.format.read import read_split
from airflow_paimon.format.scan import ScanPlanner


def test_read_split_returns_the_sequence_number_it_also_merges_by(tmp_path):
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    t = catalog.create_table("db.t", pa.schema([("k", pa.string()), ("v", pa.int64())]), primary_keys=["k"],
                             options={"bucket": "1"})
    t.write(pa.table({"k": ["a", "b"], "v": pa.array([1, 2], pa.int64())}))
    t.write(pa.table({"k": ["b", "c"], "v": pa.array([3, 4], pa.int64())}))
    snap = t.latest_snapshot()
    (split,) = ScanPlanner(t).plan(t.file_entries(snap), None, snap.id)
    assert len(split.files) == 2
    got = read_split(t, split, ["k", "v", "_SEQUENCE_NUMBER"]).to_pylist()
    assert got == [{"k": "a", "v": 1, "_SEQUENCE_NUMBER": 0}, {"k": "b", "v": 3, "_SEQUENCE_NUMBER": 2},
                   {"k": "c", "v": 4, "_SEQUENCE_NUMBER": 3}]
