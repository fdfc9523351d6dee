"""Whole-array kernels over key columns that the reader, the writer and the Spark tasks share.

Each works on Arrow arrays at once (no per-row Python), and treats two nulls as equal keys, as a GROUP BY does:
runs of equal keys in sorted data, the last row of each key, the check that a set of rows holds each key once,
and the before/after comparison of two key-unique tables that change data is built from.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_tables import no_rows
from .errors import DuplicateKeyError

__all__ = ["CHANGE_COLUMN", "SortedIntegers", "ascending_integers", "null_safe_equal", "semi_join", "equal_runs",
           "last_of_each_key", "key_text", "check_unique_keys", "diff_rows"]

CHANGE_COLUMN = "_change"   # the kind column of change rows: +I, +U, -D

Column = pa.ChunkedArray | pa.Array


def ascending_integers(col: Column) -> np.ndarray | None:
    """The values of an integer or temporal column as numpy when it has no nulls and they strictly increase (a
    data file's only key column, or keys out of one: each key once, in order), else None. Such keys merge,
    search and deduplicate with numpy alone, where any other key needs Arrow's sorts and joins."""
    if not (pa.types.is_integer(col.type) or pa.types.is_temporal(col.type)) or col.null_count:
        return None
    values = np.asarray(col.to_numpy())
    return values if len(values) < 2 or bool((values[1:] > values[:-1]).all()) else None


class SortedIntegers:
    """Strictly increasing integers (a lookup file's key column) and a sample of every `STRIDE`-th of them.

    A binary search over the whole column waits on a memory read at each of its ~20 halvings, key after key, and
    the column is far larger than the processor's caches. Here each sought key is first placed between two
    samples (a search of an array small enough to stay cached), then all of them halve their one block of
    `STRIDE` values together: the reads of one step are independent of each other, so the processor overlaps
    them, and each key touches one block instead of ~20 places spread over the column."""

    STRIDE = 64

    def __init__(self, values: np.ndarray):
        self.values = values
        self.sample = values[::self.STRIDE].copy()

    def positions(self, sought: np.ndarray) -> np.ndarray:
        """The rows holding those of the `sought` values that are present, in the order of `sought`."""
        n = len(self.values)
        if n == 0 or len(sought) == 0:
            return np.zeros(0, dtype=np.int64)
        # values outside [first, last] cannot be present: new keys of an increment often all lie past the last
        inside = (sought >= self.values[0]) & (sought <= self.values[-1])
        if not inside.all():
            sought = sought[inside]
        # the last row whose value is <= the sought one (row 0 when none is): the sample gives its block, moved
        # back to end at the last row when it would run past it (still starting at or below that row), so that
        # no probe of the halving needs bounding (a column shorter than a block is padded with its last value)
        at = np.maximum(np.searchsorted(self.sample, sought, side="right") - 1, 0) * self.STRIDE
        np.minimum(at, max(n - self.STRIDE, 0), out=at)
        values = self.values if n >= self.STRIDE else np.append(self.values, np.full(self.STRIDE - n, self.values[-1]))
        step = self.STRIDE // 2
        while step:
            at += (values[at + step] <= sought) * step
            step //= 2
        np.minimum(at, n - 1, out=at)
        found: np.ndarray = at[self.values[at] == sought]
        return found


def null_safe_equal(a: Column, b: Column) -> np.ndarray:
    """Element-wise a == b as a boolean array, where two nulls are equal and a null never equals a value."""
    if pa.types.is_nested(a.type):
        return _nested_equal(_whole(a), _whole(b))
    eq = pc.equal(a, b)
    out = np.asarray(eq.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    if eq.null_count:
        out |= _nulls(a) & _nulls(b)
    return out


def _whole(col: Column) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _as_list(arr: pa.Array) -> pa.Array:
    """A map array as the list of key/value structs it stores (Arrow's list kernels take no maps)."""
    if not pa.types.is_map(arr.type):
        return arr
    assert isinstance(arr, pa.MapArray)
    entries = pa.StructArray.from_arrays([arr.keys, arr.items], names=["key", "value"])
    return pa.ListArray.from_arrays(arr.offsets, entries, mask=arr.is_null())


def _nested_equal(a: pa.Array, b: pa.Array) -> np.ndarray:
    """null_safe_equal of ARRAY, MAP and ROW values, field by field and element by element on whole arrays
    (Arrow's equal kernel takes no nested types)."""
    na, nb = _nulls(a), _nulls(b)
    both_valid = ~na & ~nb
    if pa.types.is_struct(a.type):
        assert isinstance(a, pa.StructArray) and isinstance(b, pa.StructArray)
        same: np.ndarray = both_valid.copy()
        for child_a, child_b in zip(a.flatten(), b.flatten()):
            same &= null_safe_equal(child_a, child_b)
        return np.asarray(same | (na & nb), dtype=bool)
    la, lb = _as_list(a), _as_list(b)
    lengths_equal: Any = pc.fill_null(pc.equal(pc.list_value_length(la), pc.list_value_length(lb)), False)
    rows = np.flatnonzero(both_valid & np.asarray(lengths_equal.to_numpy(zero_copy_only=False), dtype=bool))
    taken_a, taken_b = la.take(rows), lb.take(rows)
    assert isinstance(taken_a, pa.ListArray) and isinstance(taken_b, pa.ListArray)
    la = taken_a
    elements_equal = null_safe_equal(taken_a.flatten(), taken_b.flatten())
    row_ok = np.ones(len(rows), dtype=bool)
    parents = np.asarray(pc.list_parent_indices(la).to_numpy(zero_copy_only=False), dtype=np.int64)
    row_ok[parents[~elements_equal]] = False
    out = np.asarray(na & nb, dtype=bool)
    out[rows[row_ok]] = True
    return out


def semi_join(rows: pa.Table, keys: pa.Table, names: Sequence[str]) -> pa.Table:
    """The rows of `rows` whose key (`names`) is in `keys`, in their order. Joined on keys and row positions only:
    Arrow's join takes no nested (ARRAY, MAP, ROW) payload columns."""
    positions = rows.select(list(names)).append_column("__row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    kept = positions.join(keys.select(list(names)), list(names), join_type="left semi").column("__row").to_numpy()
    return rows.take(pa.array(np.sort(kept)))


def _nulls(col: Column) -> np.ndarray:
    return np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _row_indices(col: Column) -> tuple[np.ndarray, np.ndarray]:
    """(valid mask, indices with 0 where null) of a column of row indices from an outer join."""
    valid = ~_nulls(col)
    values = np.asarray(col.to_numpy(zero_copy_only=False))
    return valid, np.where(valid, np.nan_to_num(values), 0).astype(np.int64)


def _differs_from_next(columns: Sequence[Column], num_rows: int) -> np.ndarray:
    """For rows 0..n-2: whether the row's key differs from the next row's."""
    differs = np.zeros(max(num_rows - 1, 0), dtype=bool)
    if num_rows < 2:
        return differs
    for col in columns:
        if pa.types.is_integer(col.type) and col.null_count == 0:
            # numpy compares a null-free integer column in a fraction of Arrow's per-call cost (a merge's key)
            values = np.asarray(col.to_numpy() if isinstance(col, pa.ChunkedArray) else col.to_numpy(False))
            differs |= values[1:] != values[:-1]
            continue
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        differs |= ~null_safe_equal(col.slice(0, num_rows - 1), col.slice(1))
    return differs


def equal_runs(columns: Sequence[Column], num_rows: int) -> list[tuple[int, int]]:
    """(start, end) of each run of equal keys over `columns` of key-sorted data (no columns: one run)."""
    if num_rows == 0:
        return []
    cuts = np.flatnonzero(_differs_from_next(columns, num_rows)) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    ends = np.concatenate([cuts, [num_rows]]).astype(np.int64)
    return list(zip(starts.tolist(), ends.tolist()))


def last_of_each_key(sorted_keys: Sequence[Column], num_rows: int) -> np.ndarray:
    """Mask of the rows that end a run of equal keys in key-sorted data: of versions sorted oldest first, the
    newest of each key."""
    last = np.ones(num_rows, dtype=bool)
    if num_rows > 1:
        last[:-1] = _differs_from_next(sorted_keys, num_rows)
    return last


def key_text(rows: pa.Table, keys: Sequence[str], i: int) -> str:
    """Row `i`'s key as ``k1=v1, k2=v2``, for error messages."""
    return ", ".join(f"{k}={rows.column(k)[i].as_py()!r}" for k in keys)


def check_unique_keys(rows: pa.Table, keys: Sequence[str], message: Callable[[str, int], str], *,
                      shown: Sequence[str] | None = None, presorted: bool = False) -> None:
    """DuplicateKeyError unless each value of `keys` occurs once in `rows`.

    The error's text is ``message(first duplicate key as text, rows beyond one per key)``; the key is shown over
    `shown` (default: `keys`). `presorted`: the rows are already sorted by `keys`."""
    if rows.num_rows < 2:
        return
    if not presorted:
        rows = rows.take(pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in keys]))
    keep = last_of_each_key([rows.column(k) for k in keys], rows.num_rows)
    if keep.all():
        return
    first = int(np.flatnonzero(~keep)[0])
    raise DuplicateKeyError(message(key_text(rows, list(shown or keys), first), int((~keep).sum())))


def _changes(rows: pa.Table, kind: str, change_column: str) -> pa.Table:
    return rows.append_column(change_column, pa.array([kind] * rows.num_rows, pa.string()))


def diff_rows(before: pa.Table, after: pa.Table, keys: Sequence[str], change_column: str = CHANGE_COLUMN) -> pa.Table:
    """Rows that differ between two key-unique tables: +I (only after), +U (changed, after's values), -D (only
    before, before's values); `change_column` holds the kind. A row is changed when any non-key column differs
    (two nulls are equal)."""
    names = after.column_names
    before = before.select(names)
    a = before.select(list(keys)).append_column("__ia", pa.array(np.arange(before.num_rows, dtype=np.int64)))
    b = after.select(list(keys)).append_column("__ib", pa.array(np.arange(after.num_rows, dtype=np.int64)))
    j = a.join(b, list(keys), join_type="full outer")
    has_a, ia_np = _row_indices(j.column("__ia"))
    has_b, ib_np = _row_indices(j.column("__ib"))
    parts = []
    only_b = has_b & ~has_a
    if only_b.any():
        parts.append(_changes(after.take(pa.array(ib_np[only_b])), "+I", change_column))
    both = has_a & has_b
    if both.any():
        ra = before.take(pa.array(ia_np[both]))
        rb = after.take(pa.array(ib_np[both]))
        same = np.ones(rb.num_rows, dtype=bool)
        for n in names:
            if n not in keys:
                same &= null_safe_equal(ra.column(n), rb.column(n))
        if not same.all():
            parts.append(_changes(rb.filter(pa.array(~same)), "+U", change_column))
    only_a = has_a & ~has_b
    if only_a.any():
        parts.append(_changes(before.take(pa.array(ia_np[only_a])), "-D", change_column))
    if not parts:
        return no_rows(after.schema).append_column(change_column, pa.chunked_array([], pa.string()))
    return pa.concat_tables(parts)
