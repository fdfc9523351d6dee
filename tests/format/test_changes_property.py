"""A property: for random upserts and deletes, `diff` between two snapshots is the difference of a dict model's
states, and replaying `delta` over the earlier state gives the later one."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog
from tests.sizes import scaled

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
KEYS = st.tuples(st.integers(0, 5), st.sampled_from(["x", "y"]))
STEP = st.one_of(
    st.tuples(st.just("put"), st.dictionaries(KEYS, st.integers(0, 3), min_size=1, max_size=6)),
    st.tuples(st.just("del"), st.sets(KEYS, min_size=1, max_size=4)),
    st.tuples(st.just("compact"), st.none()),
)


def apply(model: dict, step) -> None:
    kind, arg = step
    if kind == "put":
        model.update(arg)
    elif kind == "del":
        for key in arg:
            model.pop(key, None)


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=2, max_size=8), data=st.data())
def test_diff_and_delta_follow_the_model(steps, data):
    root = tempfile.mkdtemp()
    try:
        cat = Catalog(root)
        cat.create_database("db")
        t = cat.create_table("db.t", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"], options={"bucket": "3"})
        models = {0: {}}
        model: dict = {}
        for step in steps:
            kind, arg = step
            if kind == "put":
                keys = list(arg)
                snap = t.write(pa.table({"k": [k for k, _ in keys], "p": [p for _, p in keys],
                                         "v": [arg[key] for key in keys]}, schema=SCHEMA))
            elif kind == "del":
                keys = sorted(arg)
                snap = t.delete(pa.table({"k": [k for k, _ in keys], "p": [p for _, p in keys]}))
            else:
                snap = t.maintenance.compact()
            apply(model, step)
            if snap is not None:
                models[snap.id] = dict(model)
        ids = sorted(models)
        start = data.draw(st.sampled_from(ids))
        end = data.draw(st.sampled_from([i for i in ids if i >= start]))
        check(t, models, start, end)
        check(t, models, ids[min(1, len(ids) - 1)], ids[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def check(t, models: dict, start: int, end: int) -> None:
    before, after = models[start], models[end]
    got = t.changes(start, end, mode="diff").read_all().to_pylist()
    pre = {(r["k"], r["p"]): r["v"] for r in got if r["_change_type"] in ("update_preimage", "delete")}
    post = {(r["k"], r["p"]): r["v"] for r in got if r["_change_type"] in ("update_postimage", "insert")}
    assert pre == {k: v for k, v in before.items() if after.get(k, object()) != v}
    assert post == {k: v for k, v in after.items() if before.get(k, object()) != v}
    assert all(r["_commit_version"] == end for r in got)

    replay = dict(before)
    for r in t.changes(start, end, mode="delta").read_all().to_pylist():
        key = (r["k"], r["p"])
        if r["_change_type"] in ("delete", "update_preimage"):
            replay.pop(key, None)
        else:
            replay[key] = r["v"]
    assert replay == after
