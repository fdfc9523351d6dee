"""The shared Arrow kernels against plain-Python models: runs of equal keys, the last row of each key, the
unique-key check, the before/after row diff and the search of sorted integer keys."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_paimon.format.errors import DuplicateKeyError
from airflow_paimon.format.kernels import (
    SortedIntegers,
    check_unique_keys,
    diff_rows,
    equal_runs,
    last_of_each_key,
    null_safe_equal,
)
from tests.sizes import scaled

# Keys over few values, with nulls, so that runs, duplicates and null keys all occur often.
ints = st.one_of(st.none(), st.integers(-3, 3))
texts = st.one_of(st.none(), st.sampled_from(["a", "b", "é"]))
pairs = st.lists(st.tuples(ints, texts), max_size=40)


def _sort_key(key: tuple) -> tuple:
    """Nulls first, then values: any total order works, as long as equal keys end up adjacent."""
    return tuple((v is not None, v) for v in key)


def _columns(keys: list[tuple]) -> list[pa.Array]:
    return [pa.array([k[0] for k in keys], pa.int64()), pa.array([k[1] for k in keys], pa.string())]


@settings(max_examples=scaled(200), deadline=None)
@given(pairs)
def test_last_of_each_key_keeps_the_last_row_of_every_key(keys):
    keys = sorted(keys, key=_sort_key)
    mask = last_of_each_key(_columns(keys), len(keys))
    model: dict[tuple, int] = {}
    for i, k in enumerate(keys):
        model[k] = i                      # the last index a key was seen at
    assert sorted(i for i in range(len(keys)) if mask[i]) == sorted(model.values())


@settings(max_examples=scaled(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), texts), max_size=40),
       st.sampled_from([pa.int8(), pa.uint16(), pa.int64()]), st.integers(0, 40))
def test_last_of_each_key_of_a_null_free_integer_key_in_chunks(keys, key_type, cut):
    """The numpy path (an integer column without nulls, of any width, in several chunks) agrees with the model."""
    keys = sorted(keys, key=_sort_key)
    first = [k[0] for k in keys]
    column = pa.chunked_array([pa.array(first[:cut], key_type), pa.array(first[cut:], key_type)])
    mask = last_of_each_key([column, pa.array([k[1] for k in keys], pa.string())], len(keys))
    model: dict[tuple, int] = {}
    for i, k in enumerate(keys):
        model[k] = i
    assert sorted(i for i in range(len(keys)) if mask[i]) == sorted(model.values())


@settings(max_examples=scaled(200), deadline=None)
@given(pairs)
def test_equal_runs_are_the_groups_of_equal_keys(keys):
    keys = sorted(keys, key=_sort_key)
    expected, start = [], 0
    for _, group in itertools.groupby(keys):
        n = len(list(group))
        expected.append((start, start + n))
        start += n
    assert equal_runs(_columns(keys), len(keys)) == expected


def test_equal_runs_without_key_columns_is_one_run_and_chunked_columns_work():
    assert equal_runs([], 3) == [(0, 3)]
    assert equal_runs([], 0) == []
    chunked = pa.chunked_array([[1, 1], [2, None], [None]])
    assert equal_runs([chunked], 5) == [(0, 2), (2, 3), (3, 5)]


@settings(max_examples=scaled(200), deadline=None)
@given(st.lists(st.tuples(ints, ints), max_size=30))
def test_null_safe_equal_treats_two_nulls_as_equal(values):
    a = pa.array([v[0] for v in values], pa.int64())
    b = pa.array([v[1] for v in values], pa.int64())
    assert null_safe_equal(a, b).tolist() == [x == y for x, y in values]


@settings(max_examples=scaled(200), deadline=None)
@given(pairs)
def test_check_unique_keys_names_a_duplicate_and_counts_the_extra_rows(keys):
    rows = pa.table(dict(zip(["k", "s"], _columns(keys))))
    counts = Counter(keys)
    seen: list[tuple[str, int]] = []

    def message(key: str, extra: int) -> str:
        seen.append((key, extra))
        return f"duplicate {key}"

    if all(c == 1 for c in counts.values()):
        check_unique_keys(rows, ["k", "s"], message)
        assert seen == []
        return
    with pytest.raises(DuplicateKeyError, match="duplicate"):
        check_unique_keys(rows, ["k", "s"], message)
    (key, extra), = seen
    assert extra == len(keys) - len(counts)
    shown = {f"k={k!r}, s={s!r}" for (k, s), c in counts.items() if c > 1}
    assert key in shown


def test_check_unique_keys_shows_other_columns_when_asked():
    rows = pa.table({"p": ["x", "x"], "id": [7, 7]})
    with pytest.raises(DuplicateKeyError, match=r"^p='x', id=7 \+1$"):
        check_unique_keys(rows, ["id"], lambda key, extra: f"{key} +{extra}", shown=["p", "id"], presorted=True)


values = st.one_of(st.none(), st.integers(0, 2))


@settings(max_examples=scaled(200), deadline=None)
@given(st.dictionaries(st.integers(0, 8), values, max_size=8), st.dictionaries(st.integers(0, 8), values, max_size=8))
def test_diff_rows_matches_a_dict_model(before, after):
    def table(d: dict[int, int | None]) -> pa.Table:
        return pa.table({"k": pa.array(list(d), pa.int64()), "v": pa.array(list(d.values()), pa.int64())})

    expected = {(k, v, "+I") for k, v in after.items() if k not in before}
    expected |= {(k, v, "+U") for k, v in after.items() if k in before and before[k] != v}
    expected |= {(k, v, "-D") for k, v in before.items() if k not in after}
    got = diff_rows(table(before), table(after), ["k"])
    assert got.column_names == ["k", "v", "_change"]
    rows = [(r["k"], r["v"], r["_change"]) for r in got.to_pylist()]
    assert len(rows) == len(expected) and set(rows) == expected


@settings(max_examples=scaled(300), deadline=None)
@given(st.integers(0, 4 * SortedIntegers.STRIDE + 3), st.integers(0, 2**32 - 1), st.integers(-10**9, 10**9),
       st.lists(st.integers(-10**9 - 2, 10**9 + 2), max_size=20), st.sampled_from([np.int64, np.int32]))
def test_sorted_integers_find_exactly_the_rows_of_the_present_keys(size, seed, first, absent, dtype):
    """Sizes around whole blocks of the sample; sought keys below, between and above the stored ones and half of
    the stored ones, in any order: the rows found are those a dict of the stored keys gives."""
    rng = np.random.default_rng(seed)
    values = (first + np.cumsum(rng.integers(1, 5, size))).astype(dtype)
    present = rng.choice(values, size // 2, replace=False) if size else values
    sought = rng.permutation(np.concatenate([present, np.array(absent, dtype=np.int64).astype(dtype)]))
    row_of = {int(v): i for i, v in enumerate(values)}
    expected = [row_of[int(k)] for k in sought if int(k) in row_of]
    assert SortedIntegers(values).positions(sought).tolist() == expected


_VALUES = st.tuples(st.none() | st.integers(0, 2), st.none() | st.text("ab", max_size=2), st.none() | st.integers(0, 2))


@settings(max_examples=scaled(200), deadline=None)
@given(st.dictionaries(st.integers(0, 40), _VALUES, max_size=25),
       st.dictionaries(st.integers(0, 40), _VALUES, max_size=25))
def test_diff_compare_tells_pairs_apart_by_any_column(before, after):
    """Keys at both ends with values differing in any one column, several, or none (NULLs equal only NULLs): the
    diff's comparison gives a pre/post pair exactly for the keys whose rows differ, deletes and inserts for the
    rest, whichever column tells a pair apart first."""
    from airflow_paimon.format.changes.diff import compare
    from airflow_paimon.format.data_file import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE

    def table(rows):
        keys = sorted(rows)
        return pa.table({"k": pa.array(keys, pa.int64()), "a": pa.array([rows[k][0] for k in keys], pa.int64()),
                         "b": pa.array([rows[k][1] for k in keys], pa.string()),
                         "c": pa.array([rows[k][2] for k in keys], pa.int64())})

    got, kinds = compare(table(before), table(after), ["k"])
    rows = [(kind, r["k"], r["a"], r["b"], r["c"]) for kind, r in zip(kinds.tolist(), got.to_pylist())]
    expected = [(DELETE, k, *before[k]) for k in sorted(before) if k not in after]
    for k in sorted(set(before) & set(after)):
        if before[k] != after[k]:
            expected += [(UPDATE_BEFORE, k, *before[k]), (UPDATE_AFTER, k, *after[k])]
    expected += [(INSERT, k, *after[k]) for k in sorted(after) if k not in before]
    assert rows == expected
