"""Integer keys take numpy paths through the lookup producer and the diff (a binary search where other keys join or
sort, kernels.ascending_integers); a string key of the same order takes the general ones. Both must give the same
changelog and the same diffs (from every snapshot to the latest), in the same order, for random upserts, deletes
and compactions."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog
from tests.sizes import scaled

STEP = st.one_of(
    st.tuples(st.just("put"), st.dictionaries(st.integers(0, 40), st.one_of(st.none(), st.integers(0, 3)),
                                              min_size=1, max_size=12)),
    st.tuples(st.just("del"), st.sets(st.integers(0, 40), min_size=1, max_size=6)),
    st.tuples(st.just("compact"), st.none()),
)


def _key(k: int, as_text: bool) -> int | str:
    return f"{k:04d}" if as_text else k


def _apply(table, step, as_text: bool):
    kind, arg = step
    if kind == "put":
        keys = sorted(arg)
        return table.write(pa.table({"k": [_key(k, as_text) for k in keys], "v": [arg[k] for k in keys]},
                                    schema=table.arrow_schema()))
    if kind == "del":
        return table.delete(pa.table({"k": [_key(k, as_text) for k in sorted(arg)]}))
    return table.maintenance.compact()


def _rows(reader: pa.RecordBatchReader) -> list[tuple]:
    """The feed's rows in its order (one bucket: each commit's rows in key order, a key's pre-image first)."""
    got = reader.read_all()
    keys = [int(k) for k in got.column("k").to_pylist()]
    return list(zip(got.column("_commit_version").to_pylist(), keys, got.column("_change_type").to_pylist(),
                    got.column("v").to_pylist()))


@settings(max_examples=scaled(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=2, max_size=8))
def test_integer_and_string_keys_give_the_same_changes(steps):
    root = tempfile.mkdtemp()
    try:
        cat = Catalog(root)
        cat.create_database("db")
        tables = {}
        for as_text in (False, True):
            schema = pa.schema([("k", pa.string() if as_text else pa.int64()), ("v", pa.int64())])
            tables[as_text] = cat.create_table(f"db.t_{int(as_text)}", schema, primary_keys=["k"],
                                               options={"bucket": "1", "changelog-producer": "lookup"})
        for step in steps:
            snaps = [_apply(tables[as_text], step, as_text) for as_text in (False, True)]
            assert (snaps[0] is None) == (snaps[1] is None)
        latest = tables[False].latest_snapshot()
        if latest is None:
            return
        assert latest.id == tables[True].latest_snapshot().id
        ranges = [("changelog", 0, latest.id)] + [("diff", start, latest.id) for start in range(latest.id)]
        for mode, start, end in ranges:
            got = [_rows(tables[as_text].changes(start, end, mode=mode)) for as_text in (False, True)]
            assert got[0] == got[1], (mode, start, end)
    finally:
        shutil.rmtree(root, ignore_errors=True)
