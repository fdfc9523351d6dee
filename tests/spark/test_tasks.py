"""How work is cut for Spark tasks, without a Spark session: balanced groups of planned units, and a task's rows
cut per (partition, bucket)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_paimon.spark.tasks import balanced_groups, bucket_groups
from tests.sizes import scaled


@settings(max_examples=scaled(200), deadline=None)
@given(st.lists(st.integers(0, 1000), max_size=30), st.integers(1, 8))
def test_balanced_groups_place_every_unit_once_in_at_most_k_groups(sizes, k):
    groups = balanced_groups(sizes, k)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
    assert len(groups) == max(1, min(k, len(sizes)))
    if sizes:
        totals = [sum(max(1, sizes[i]) for i in g) for g in groups]
        # Largest first, each to the lightest group: no group exceeds another by more than the largest unit.
        assert max(totals) - min(totals) <= max(max(1, s) for s in sizes)


@settings(max_examples=scaled(200), deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["a", "b"])), st.integers(0, 2)), max_size=30))
def test_bucket_groups_hold_each_partition_and_bucket_once_in_row_order(rows):
    data = pa.table({"p": pa.array([p for p, _ in rows], pa.string()),
                     "__bucket": pa.array([b for _, b in rows], pa.int32()),
                     "i": pa.array(range(len(rows)), pa.int64())})
    groups = bucket_groups(data, ["p"], "__bucket")
    model: dict[tuple, list[int]] = {}
    for i, (p, b) in enumerate(rows):
        model.setdefault(((p,), b), []).append(i)
    assert {(g.partition, g.bucket): g.rows.column("i").to_pylist() for g in groups} == model
    assert len(groups) == len(model)
