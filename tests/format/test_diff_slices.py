"""A bucket whose changed files hold many rows is diffed one key range at a time (changes/slices.py), its files
read side by side a batch at a time: the same answer as the whole bucket compared at once, in a fraction of the
memory, whatever the size of the files' row groups."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog, data_file
from airflow_paimon.format.changes import slices
from airflow_paimon.format.changes.slices import key_slices
from airflow_paimon.format.errors import CorruptFileError
from airflow_paimon.format.read import merge_columns, version_schema
from tests.sizes import scaled


@contextmanager
def small_groups(rows_per_group: int, slice_rows: int) -> Iterator[None]:
    """Files written with row groups of `rows_per_group` rows, diffs sliced above `slice_rows` rows."""
    saved = data_file.ROW_GROUP_ROWS, slices.SLICE_ROWS
    data_file.ROW_GROUP_ROWS, slices.SLICE_ROWS = rows_per_group, slice_rows
    try:
        yield
    finally:
        data_file.ROW_GROUP_ROWS, slices.SLICE_ROWS = saved


def diff_rows(t, start, end, slice_rows: int) -> list[tuple]:
    saved = slices.SLICE_ROWS
    slices.SLICE_ROWS = slice_rows
    try:
        got = t.changes(start, end, mode="diff").read_all()
    finally:
        slices.SLICE_ROWS = saved
    return sorted(tuple(r.values()) for r in got.to_pylist())


def changed_files(t, start, end):
    """(bucket, file) of the files only the end lists."""
    before = {e.file.file_name for e in t.file_entries(t.snapshot(start))}
    return [(e.bucket, e.file) for e in t.file_entries(t.snapshot(end)) if e.file.file_name not in before]


def cut(t, files, limit, positions=False):
    """The slices a diff cuts `files` ((bucket, file) of the unpartitioned table `t`) into, or None."""
    found = key_slices(t, (), files, merge_columns(t, t.schema().field_names), version_schema(t), limit,
                       positions=positions)
    return None if found is None else list(found)


@pytest.mark.parametrize("key_type,make_key", [
    (pa.int64(), lambda i: i),
    (pa.string(), lambda i: f"key-{i:06d}"),
    (pa.date32(), lambda i: datetime.date(2000, 1, 1) + datetime.timedelta(days=int(i))),
])
def test_a_sliced_diff_equals_the_whole_bucket_diff(catalog, key_type, make_key):
    schema = pa.schema([("k", key_type), ("n", pa.int32()), ("v", pa.string())])
    t = catalog.create_table("db.sliced", schema, primary_keys=["k", "n"], options={"bucket": "2"})

    def rows(ids, version):
        return pa.table({"k": [make_key(i) for i in ids], "n": [int(i % 3) for i in ids],
                         "v": [f"v{version}-{i}" for i in ids]}, schema=schema)

    rng = np.random.default_rng(7)
    with small_groups(rows_per_group=50, slice_rows=120):
        start = t.write(rows(range(2000), 0)).id
        t.create_tag("start")
        t.write(rows(rng.choice(2500, 600, replace=False), 1))
        t.delete(rows(rng.choice(2000, 40, replace=False), 0).select(["k", "n"]))
        t.write(rows(rng.choice(2500, 300, replace=False), 2))
        t.create_tag("middle")
        end = t.maintenance.compact().id
        t.create_tag("end")
        files = [f for f in changed_files(t, start, end) if f[0] == 0]
        planned = cut(t, files, slices.SLICE_ROWS)
    assert planned is not None and len(planned) > 5
    # each row of the files goes to exactly one slice, and the slices' ranges follow each other
    assert sum(p.num_rows for s in planned for p in s.rows.values()) == sum(f.row_count for _, f in files)
    highs = [max(p.column("k").to_pylist()) for s in planned for p in s.rows.values()]
    lows = [min(p.column("k").to_pylist()) for s in planned for p in s.rows.values()]
    per_slice = [(min(lows[i] for i in idx), max(highs[i] for i in idx))
                 for idx in _slice_indices(planned)]
    assert all(a[1] < b[0] for a, b in zip(per_slice, per_slice[1:]))
    for a, b in (("start", "middle"), ("start", "end"), ("middle", "end")):
        whole = diff_rows(t, a, b, slice_rows=10**9)
        assert bool(whole) == (a == "start"), (a, b)   # middle to end: a compaction, no change
        assert diff_rows(t, a, b, slice_rows=120) == whole
        assert diff_rows(t, a, b, slice_rows=16) == whole


@pytest.mark.parametrize("options", [
    {"deletion-vectors.enabled": "true"},
    {"deletion-vectors.enabled": "true", "deletion-vectors.merge-on-read": "true"},
    {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
])
def test_a_deletion_vector_table_is_diffed_in_slices_too(catalog, options):
    """A deletion-vector bucket is read at both ends as a batch read reads it (files above level 0 without the
    rows their vectors delete): sliced, each end's files are read by range, with the vectors applied by position."""
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    t = catalog.create_table("db.vectors", schema, primary_keys=["k"], options={"bucket": "2", **options})
    rng = np.random.default_rng(11)

    def rows(ids, version):
        return pa.table({"k": np.asarray(ids, np.int64), "v": [f"v{version}-{i}" for i in ids]}, schema=schema)

    with small_groups(rows_per_group=40, slice_rows=100):
        ends = [t.write(rows(range(1500), 0)).id]
        t.write(rows(rng.choice(1800, 300, replace=False), 1))
        t.delete(rows(rng.choice(1500, 60, replace=False), 0).select(["k"]))
        ends.append(t.latest_snapshot().id)
        t.maintenance.compact()
        t.write(rows(rng.choice(1800, 100, replace=False), 2))
        ends.append(t.latest_snapshot().id)
        found = cut(t, [(e.bucket, e.file) for e in t.file_entries(t.snapshot(ends[-1])) if e.bucket == 0],
                    slices.SLICE_ROWS, positions=True)
    assert found is not None and len(found) > 3
    # each row with its position in its file
    for s in found:
        for rows in s.rows.values():
            assert rows.column(slices.POSITION).to_pylist() == sorted(set(rows.column(slices.POSITION).to_pylist()))
    for a, b in ((ends[0], ends[1]), (ends[0], ends[2]), (ends[1], ends[2])):
        whole = diff_rows(t, a, b, slice_rows=10**9)
        assert whole
        assert diff_rows(t, a, b, slice_rows=100) == whole
        assert diff_rows(t, a, b, slice_rows=16) == whole


def overlapping_writes(catalog, name: str, dtype: type) -> tuple:
    """A one-bucket table (key `k` of `dtype`), written twice in row groups of 10 rows, the second write overlapping
    half of the first: (the table, the first snapshot id, the second)."""
    schema = pa.schema([("k", pa.from_numpy_dtype(np.dtype(dtype))), ("v", pa.int64())])
    t = catalog.create_table(f"db.{name}", schema, primary_keys=["k"], options={"bucket": "1"})
    with small_groups(rows_per_group=10, slice_rows=20):
        first = t.write(pa.table({"k": np.arange(100, dtype=dtype), "v": np.zeros(100, np.int64)}))
        second = t.write(pa.table({"k": np.arange(50, 150, dtype=dtype), "v": np.ones(100, np.int64)}))
    return t, first.id, second.id


def test_a_float_first_key_is_compared_whole(catalog):
    """Arrow orders floating point otherwise than Paimon (-0.0 before 0.0, NaN last): no slices by such a key."""
    t, first, second = overlapping_writes(catalog, "floats", np.float64)
    assert cut(t, changed_files(t, first, second), 20) is None
    assert len(diff_rows(t, first, second, slice_rows=20)) == 150


def _slice_indices(planned):
    """Per slice, the indices of its parts in the flat list of all slices' parts."""
    out, at = [], 0
    for s in planned:
        out.append(range(at, at + len(s.rows)))
        at += len(s.rows)
    return out


def test_one_row_group_larger_than_a_slice_is_cut_into_many(catalog):
    """Files of one row group each, as Paimon's writers make them up to 128 MB, and small files of keys spread
    over the whole bucket: every row is read once, into slices of about the limit."""
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    t = catalog.create_table("db.spread", schema, primary_keys=["k"], options={"bucket": "1"})
    rng = np.random.default_rng(3)
    with small_groups(rows_per_group=10**6, slice_rows=100):
        start = t.write(pa.table({"k": [0], "v": [0]})).id
        t.write(pa.table({"k": np.arange(4000), "v": np.zeros(4000, np.int64)}))
        for i in range(12):
            end = t.write(pa.table({"k": np.sort(rng.choice(4000, 40, replace=False)),
                                    "v": np.full(40, i + 1, np.int64)})).id
        changed = changed_files(t, start, end)
        planned = cut(t, changed, slices.SLICE_ROWS)
    assert all(pq.ParquetFile(t.data_file_path((), b, f)).metadata.num_row_groups == 1 for b, f in changed)
    assert planned is not None and len(planned) > 30
    sizes = [sum(p.num_rows for p in s.rows.values()) for s in planned]
    assert sum(sizes) == sum(f.row_count for _, f in changed)
    assert max(sizes) <= 2 * 100
    assert diff_rows(t, start, end, slice_rows=100) == diff_rows(t, start, end, slice_rows=10**9)


def test_a_file_not_sorted_by_key_is_an_error_not_a_wrong_diff(catalog):
    t, first, second = overlapping_writes(catalog, "unsorted", np.int64)
    ((bucket, meta),) = changed_files(t, first, second)
    path = t.data_file_path((), bucket, meta)
    rows = pq.read_table(path)
    pq.write_table(rows.take(pa.array(np.arange(rows.num_rows)[::-1])), path, row_group_size=10)
    with pytest.raises(CorruptFileError, match="sorted by primary key"):
        diff_rows(t, first, second, slice_rows=20)


SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
KEYS = st.tuples(st.integers(0, 30), st.sampled_from(["x", "y"]))
STEP = st.one_of(
    st.tuples(st.just("put"), st.dictionaries(KEYS, st.integers(0, 3), min_size=1, max_size=12)),
    st.tuples(st.just("del"), st.sets(KEYS, min_size=1, max_size=6)),
    st.tuples(st.just("compact"), st.none()),
)


@settings(max_examples=scaled(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=2, max_size=8), data=st.data(), rows_per_group=st.integers(1, 4))
def test_sliced_diffs_follow_the_model(steps, data, rows_per_group):
    """Random upserts, deletes and compactions, rows in groups of 1-4 and slices of one row: every diff is the
    model's, the same as the unsliced one."""
    root = tempfile.mkdtemp()
    try:
        cat = Catalog(root)
        cat.create_database("db")
        t = cat.create_table("db.t", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"], options={"bucket": "2"})
        models: dict[int, dict] = {0: {}}
        model: dict = {}
        with small_groups(rows_per_group, slice_rows=1):
            for kind, arg in steps:
                if kind == "put":
                    keys = list(arg)
                    snap = t.write(pa.table({"k": [k for k, _ in keys], "p": [p for _, p in keys],
                                             "v": [arg[key] for key in keys]}, schema=SCHEMA))
                    model.update(arg)
                elif kind == "del":
                    keys = sorted(arg)
                    snap = t.delete(pa.table({"k": [k for k, _ in keys], "p": [p for _, p in keys]}))
                    for key in keys:
                        model.pop(key, None)
                else:
                    snap = t.maintenance.compact()
                if snap is not None:
                    models[snap.id] = dict(model)
        ids = sorted(models)
        start = data.draw(st.sampled_from(ids))
        end = data.draw(st.sampled_from([i for i in ids if i >= start]))
        got = diff_rows(t, start, end, slice_rows=1)
        assert got == diff_rows(t, start, end, slice_rows=10**9)
        before, after = models[start], models[end]
        pre = {(k, p): v for k, p, v, kind, *_ in got if kind in ("update_preimage", "delete")}
        post = {(k, p): v for k, p, v, kind, *_ in got if kind in ("update_postimage", "insert")}
        assert pre == {k: v for k, v in before.items() if after.get(k, object()) != v}
        assert post == {k: v for k, v in after.items() if before.get(k, object()) != v}
    finally:
        shutil.rmtree(root, ignore_errors=True)


_PEAK = """
import json, sys
import pyarrow as pa
import pyarrow.parquet as pq
from airflow_paimon.format import Catalog
from airflow_paimon.format.changes import slices
slices.SLICE_ROWS = int(sys.argv[2])
t = Catalog(sys.argv[1]).get_table("db.big")
base = pa.default_memory_pool().max_memory()
rows = sum(b.num_rows for b in t.changes("start", "end", mode="diff"))
print(json.dumps([rows, pa.default_memory_pool().max_memory() - base]))
"""


def _peak(warehouse: str, slice_rows: int) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _PEAK, warehouse, str(slice_rows)], capture_output=True, text=True,
                         check=True)
    rows, peak = json.loads(out.stdout.splitlines()[-1])
    return rows, peak


@pytest.mark.parametrize("rows_per_group", [data_file.ROW_GROUP_ROWS, 10**7], ids=["groups", "one-group-per-file"])
def test_a_diff_across_a_full_compaction_holds_a_slice_not_the_bucket(tmp_path, rows_per_group):
    """One bucket of 600,000 rows, every file rewritten by a full compaction between the ends (every key is a
    changed key): compared whole, the diff holds both ends' rows of the bucket; sliced, a few slices' worth, also
    when each file is one row group (as Paimon's writers make files up to 128 MB)."""
    n = 600_000
    schema = pa.schema([("k", pa.int64()), ("name", pa.string()), ("v", pa.float64())])
    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.big", schema, primary_keys=["k"], options={"bucket": "1"})
    ids = np.arange(n)
    changed = ids[::100]
    with small_groups(rows_per_group, slice_rows=slices.SLICE_ROWS):
        t.write(pa.table({"k": ids, "name": pa.array([f"customer-{i:08d}" for i in ids]), "v": np.zeros(n)}))
        t.create_tag("start")
        t.write(pa.table({"k": changed, "name": pa.array([f"customer-{i:08d}" for i in changed]),
                          "v": np.ones(len(changed))}))
        t.maintenance.compact()
        t.create_tag("end")
    whole_rows, whole_peak = _peak(str(tmp_path), 10**9)
    sliced_rows, sliced_peak = _peak(str(tmp_path), 65_536)
    assert whole_rows == sliced_rows == 2 * len(changed)
    assert sliced_peak < 0.5 * whole_peak, (sliced_peak, whole_peak)
