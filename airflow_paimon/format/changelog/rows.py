"""The changelog between a key's value before and after a change, on whole Arrow tables.

Rows here have the table's columns plus `_SEQUENCE_NUMBER` and `_VALUE_KIND`. The rules are those of Paimon's
`LookupChangelogMergeFunctionWrapper.setChangelog` (and `FullChangelogMergeFunctionWrapper`, which agrees for
every key it is asked about): no value before and an insert or update after gives +I(after); a value before and
a retraction after gives -D(before); values on both sides give -U(before) +U(after), unless
`changelog-producer.row-deduplicate` is true and the values are equal (ignoring
`changelog-producer.row-deduplicate-ignore-fields`). Each changelog row keeps the sequence number of the version
it shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data_file import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, write_kv_file
from ..kernels import ascending_integers, last_of_each_key
from ..manifest import DataFileMeta
from ..schema import SEQUENCE_NUMBER, VALUE_KIND
from ..versions import version_sort_indices

if TYPE_CHECKING:
    from ..table import Table

_SIDE = "__side"


def is_add(kinds: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: +I or +U (a value), not -U or -D (a retraction)."""
    codes: np.ndarray = kinds.to_numpy(zero_copy_only=False) if isinstance(kinds, pa.Array) else kinds.to_numpy()
    mask: np.ndarray = (codes == INSERT) | (codes == UPDATE_AFTER)
    return mask


def values_only(rows: pa.Table) -> pa.Table:
    """The rows that hold a value (+I, +U), not a retraction; `rows` itself, not a copy, when every row does."""
    if rows.num_rows == 0:
        return rows
    keep = is_add(rows.column(VALUE_KIND))
    return rows if keep.all() else rows.filter(pa.array(keep))


def newest(table: "Table", rows: pa.Table) -> pa.Table:
    """The newest version of each key (retractions included), sorted by key: Paimon's deduplicate merge."""
    if rows.num_rows == 0:
        return rows
    keys = table.schema().trimmed_primary_keys
    if len(keys) == 1 and ascending_integers(rows.column(keys[0])) is not None:
        return rows   # one version per key already in key order (rows of one data file): each is the newest
    options = table.core_options
    order = version_sort_indices(rows, keys, options.sequence_fields, options.sequence_descending,
                                 [SEQUENCE_NUMBER])
    rows = rows.take(pa.array(order))
    keep = last_of_each_key([rows.column(k) for k in keys], rows.num_rows)
    return rows if keep.all() else rows.filter(pa.array(keep))


def _equal_rows(left: pa.Table, right: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Per row pair: every column equal (two nulls are equal), as Paimon's RecordEqualiser compares."""
    same = np.ones(left.num_rows, dtype=bool)
    for name in columns:
        a, b = left.column(name).combine_chunks(), right.column(name).combine_chunks()
        eq = pc.equal(a, b).fill_null(False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
        same &= eq | both_null
    return same


def _after_positions(before: pa.Table, after: pa.Table, keys: Sequence[str]) -> np.ndarray | None:
    """For key-ordered integer keys (each side one row per key) whose every before key has its after row: the
    position in `after` of each before row's key, found by one search; None otherwise."""
    if len(keys) != 1:
        return None
    b, a = ascending_integers(before.column(keys[0])), ascending_integers(after.column(keys[0]))
    if b is None or a is None:
        return None
    at = np.searchsorted(a, b)
    if len(b) == 0 or (at[-1] < len(a) and bool((a[at] == b).all())):
        return at
    return None


def _before_after_order(before: pa.Table, after: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Positions in [before; after] ordering the rows by key, a key's before row first. Key-ordered integer keys
    (each side one row per key, as the producers give them, every before key with its after row) are merged in
    linear time: a before row goes just ahead of its after row, and an after row moves down by the before rows
    placed up to it. Others are sorted."""
    nb = before.num_rows
    at = _after_positions(before, after, keys)
    if at is not None:
        na = after.num_rows
        order = np.empty(nb + na, dtype=np.int64)
        order[at + np.arange(nb)] = np.arange(nb)
        ahead = np.cumsum(np.bincount(at, minlength=na))   # before rows placed up to each after row
        order[np.arange(na) + ahead] = nb + np.arange(na)
        return order
    return _sorted_order(before, after, keys)


def _sorted_order(before: pa.Table, after: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """`_before_after_order` by a sort, for keys the search cannot place."""
    nb = before.num_rows
    side = pa.array(np.concatenate([np.zeros(nb, dtype=np.int8), np.ones(after.num_rows, dtype=np.int8)]))
    both = pa.concat_tables([before.select(list(keys)), after.select(list(keys))]).append_column(_SIDE, side)
    return np.asarray(pc.sort_indices(both, sort_keys=[(k, "ascending") for k in keys] + [(_SIDE, "ascending")]))


def changes(table: "Table", before: pa.Table, after: pa.Table) -> pa.Table:
    """The changelog rows turning `before` into `after`, sorted by key (a key's -U before its +U).

    `after`: one row per key (the merge result, possibly a retraction); `before`: at most one value per key of
    `after` (keys absent or retracted before have no row; retractions in `before` are ignored).
    """
    columns = after.column_names
    before = values_only(before.select(columns))
    nb, n = before.num_rows, before.num_rows + after.num_rows
    if n == 0:
        return after.slice(0, 0)
    keys = table.schema().trimmed_primary_keys
    order = _before_after_order(before, after, keys)
    both = pa.concat_tables([before, after])
    side = order >= nb                    # per changelog position: an after row
    # every before row is a value (retractions were dropped above)
    add = np.concatenate([np.ones(nb, dtype=bool), is_add(after.column(VALUE_KIND))])[order]
    # Every before row is followed by the after row of its key; an after row has a before row iff one precedes.
    has_before = np.zeros(n, dtype=bool)
    has_before[1:] = ~side[:-1]
    b_idx = np.flatnonzero(~side)
    pair_add = np.zeros(n, dtype=bool)     # at before rows: the after of the pair is a value
    pair_add[b_idx] = add[b_idx + 1]
    differs = np.ones(n, dtype=bool)       # at before rows and at their after rows
    options = table.core_options
    if options.changelog_row_deduplicate and len(b_idx):
        ignored = set(options.changelog_row_deduplicate_ignore_fields)
        compared = [c for c in table.schema().field_names if c not in ignored]
        same = _equal_rows(both.take(order[b_idx]), both.take(order[b_idx + 1]), compared)
        differs[b_idx] = ~same
        differs[b_idx + 1] = ~same
    insert = side & ~has_before & add
    update_after = side & has_before & add & differs
    delete = ~side & ~pair_add
    update_before = ~side & pair_add & differs
    kinds = np.full(n, INSERT, dtype=np.int8)
    kinds[update_after] = UPDATE_AFTER
    kinds[delete] = DELETE
    kinds[update_before] = UPDATE_BEFORE
    keep = insert | update_after | delete | update_before
    if not keep.all():
        order, kinds = order[keep], kinds[keep]
    out = both.take(pa.array(order))
    return out.set_column(columns.index(VALUE_KIND), VALUE_KIND, pa.array(kinds))


def after_kinds(table: "Table", before: pa.Table, after: pa.Table) -> np.ndarray:
    """The changelog kind of each row of `after` (one value per key, none a retraction): +U where `before` (at
    most one value per key of `after`) has a value of its key, else +I."""
    before = values_only(before)
    nb = before.num_rows
    keys = table.schema().trimmed_primary_keys
    at = _after_positions(before, after, keys)
    if at is not None:   # the after rows found by the search are the updated ones
        kinds = np.full(after.num_rows, INSERT, dtype=np.int8)
        kinds[at] = UPDATE_AFTER
        return kinds
    order = _sorted_order(before, after, keys)   # (the search found no place for them: sorted)
    side = order >= nb
    has_before = np.zeros(len(order), dtype=bool)
    has_before[1:] = ~side[:-1]
    kinds = np.empty(after.num_rows, dtype=np.int8)
    kinds[order[side] - nb] = np.where(has_before[side], UPDATE_AFTER, INSERT)
    return kinds


def write_changelog(table: "Table", partition: tuple, bucket: int, rows: pa.Table,
                    file_source: int, dictionary: Sequence[str] | None = None) -> list[DataFileMeta]:
    """`rows` (sorted by key) as one changelog file in the bucket directory: `changelog-<uuid>-0.parquet` (the
    table's changelog-file.prefix and .compression), with a data file's columns; nothing when there are no rows.
    `dictionary`: the columns to try a dictionary on, decided on the data file written with it (see
    `write_kv_file`)."""
    if rows.num_rows == 0:
        return []
    schema = table.schema()
    seq = rows.column(SEQUENCE_NUMBER).combine_chunks().cast(pa.int64())
    kinds = rows.column(VALUE_KIND).combine_chunks().cast(pa.int8())
    data = rows.select(schema.field_names)
    return [write_kv_file(table.io, table.bucket_dir(partition, bucket), schema, data, seq, kinds,
                          table.core_options.changelog_codec,
                          prefix=table.core_options.changelog_file_prefix, stats=table.core_options.stats, level=0,
                          changelog=True, file_source=file_source, dictionary=dictionary)]
