"""Paimon's change system tables: `t$audit_log`, `t$binlog` and `t$consumers`, as Arrow.

`$audit_log` is `rowkind` ('+I', '-U', '+U', '-D') then the table's columns. Read at a snapshot (the latest by
default) it holds each key's newest version with its kind, deletes kept, as Paimon's batch read of it does; read
over a range (start, end] it holds the change rows of `Table.changes`. `$binlog` is `rowkind` then each column
as an array: one value, or for an update read over a range the pre-image and post-image packed into one `+U` row
`[before, after]`, as Paimon's streaming binlog read packs them. `$consumers` lists `consumer_id` and
`next_snapshot_id`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .changes.rows import CHANGE_TYPES
from .read import fill_partition, merge_on_read, read_files, version_schema
from .schema import SEQUENCE_NUMBER, VALUE_KIND
from .versions import KIND_NAMES

if TYPE_CHECKING:
    from .table import Table

ROWKIND = "rowkind"
_CONSUMER_FIELDS: list[pa.Field] = [pa.field("consumer_id", pa.string(), False),
                                    pa.field("next_snapshot_id", pa.int64(), False)]
CONSUMERS_SCHEMA = pa.schema(_CONSUMER_FIELDS)
_KIND_TEXT = pa.array(list(KIND_NAMES))


def consumers_table(table: "Table") -> pa.Table:
    rows = sorted(table.consumers.positions().items())
    return pa.table({"consumer_id": [r[0] for r in rows], "next_snapshot_id": [r[1] for r in rows]},
                    schema=CONSUMERS_SCHEMA)


def _with_kinds(data: pa.Table, kinds: np.ndarray) -> pa.Table:
    indices: Any = pa.array(kinds.astype(np.int8))
    text = pc.take(_KIND_TEXT, indices)
    out = data.add_column(0, pa.field(ROWKIND, pa.string(), False), text)
    return out


def _snapshot_rows(table: "Table", snapshot_id: int | None, tag: str | None, as_of: Any) -> tuple[pa.Table,
                                                                                                  np.ndarray]:
    logical = table.arrow_schema()
    splits = table.plan(snapshot_id, tag, as_of)
    if not splits:
        return logical.empty_table(), np.zeros(0, dtype=np.int8)
    parts, kinds = [], []
    for split in splits:
        if table.is_primary_key:
            schema = table.schema()
            file_schema = version_schema(table)
            files = read_files(table, split, logical.names + [SEQUENCE_NUMBER, VALUE_KIND], file_schema)
            opts = table.core_options
            merged = merge_on_read(files, schema.trimmed_primary_keys, list(opts.sequence_fields), False, False,
                                   seq_descending=opts.sequence_descending)
            kinds.append(merged.column(VALUE_KIND).to_numpy().astype(np.int8))
            merged = merged.select(logical.names)
        else:
            merged = pa.concat_tables(read_files(table, split, logical.names, logical))
            kinds.append(np.zeros(merged.num_rows, dtype=np.int8))
        parts.append(fill_partition(table, split, merged).cast(logical))
    return pa.concat_tables(parts), np.concatenate(kinds)


def _range_rows(table: "Table", start: Any, end: Any, mode: str) -> tuple[pa.Table, np.ndarray]:
    feed = table.changes(start, end, mode=mode).read_all()
    kinds = pc.index_in(feed.column("_change_type"), value_set=CHANGE_TYPES).to_numpy().astype(np.int8)
    return feed.select(table.arrow_schema().names), kinds


def audit_log_table(table: "Table", snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None,
                    start: Any = None, end: Any = None, mode: str = "auto") -> pa.Table:
    if start is not None or end is not None:
        data, kinds = _range_rows(table, start, end, mode)
    else:
        data, kinds = _snapshot_rows(table, snapshot_id, tag, as_of)
    return _with_kinds(data, kinds)


def _pack(data: pa.Table, kinds: np.ndarray, keys: list[str]) -> pa.Table:
    """Each row's columns as arrays; a -U directly followed by a +U of the same key becomes one `+U` row."""
    n = data.num_rows
    pre = np.zeros(n, dtype=bool)
    if n > 1 and keys:
        same_key = np.ones(n - 1, dtype=bool)
        for k in keys:
            col = data.column(k)
            a, b = col.slice(0, n - 1), col.slice(1)
            raw: Any = pc.equal(a, b)
            equal: Any = pc.fill_null(raw, False)
            same_key &= np.asarray(equal.to_numpy(zero_copy_only=False), dtype=np.bool_)
        pre[:-1] = (kinds[:-1] == 1) & (kinds[1:] == 2) & same_key
    post = np.zeros(n, dtype=bool)
    post[1:] = pre[:-1]
    first = np.flatnonzero(~post)            # rows that start an output row
    paired = pre[first]
    lengths = np.where(paired, 2, 1)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    total = int(offsets[-1])
    take = np.repeat(first, lengths) + (np.arange(total) - np.repeat(offsets[:-1], lengths))
    arrays = []
    for name in data.column_names:
        values = data.column(name).combine_chunks().take(pa.array(take, pa.int64()))
        list_offsets: Any = pa.array(offsets, pa.int32())
        arrays.append(pa.ListArray.from_arrays(list_offsets, values))
    out_kinds = np.where(paired, 2, kinds[first]).astype(np.int8)
    packed = pa.Table.from_arrays(arrays, names=data.column_names)
    return _with_kinds(packed, out_kinds)


def binlog_table(table: "Table", snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None,
                 start: Any = None, end: Any = None, mode: str = "auto") -> pa.Table:
    if start is not None or end is not None:
        data, kinds = _range_rows(table, start, end, mode)
    else:
        data, kinds = _snapshot_rows(table, snapshot_id, tag, as_of)
    return _pack(data, kinds, table.schema().trimmed_primary_keys + table.partition_keys)
