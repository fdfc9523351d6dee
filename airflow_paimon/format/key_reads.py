"""Reading only the rows of some keys out of a bucket's data files, for the lookup producer and the `diff` mode.

Both need the versions of a few keys (those a write or a changed file touches) out of files that may hold many
more. A file whose key range [minKey, maxKey] (from its manifest entry) cannot hold one of the keys is not
opened; of the others only the key columns are read first, and the rest of the wanted columns are read only
from files holding at least one of the keys, keeping only those keys' rows. Every step works on whole Arrow
arrays: the range test on the first key column, membership by `is_in` (one key column) or a semi join.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .binary_row import deserialize_row
from .deletion_vectors import read_deletion_files
from .evolution import evolved, file_columns, read_data_file
from .kernels import SortedIntegers, ascending_integers
from .lookup_files import LookupCopy, LookupFiles
from .manifest import DataFileMeta
from .read import fill_partition, merge_columns, merge_versions, read_split, version_schema, with_default_values
from .scan import Split

if TYPE_CHECKING:
    from .table import Table

__all__ = ["may_hold_keys", "read_rows_of_keys", "read_split_of_keys"]

_ROW = "__row"


def may_hold_keys(table: "Table", meta: DataFileMeta, first_keys: pa.Array) -> bool:
    """Whether the file's key range may hold one of the keys whose first key column is `first_keys`.

    A key inside [minKey, maxKey] (ordered as tuples) has its first column inside the first columns' range, so
    testing that column alone never skips a file that holds a key; statistics of an unexpected shape keep it."""
    if len(first_keys) == 0:
        return False
    written = table.schema_by_id(meta.schema_id)
    try:
        key_type = written.arrow_type(written.trimmed_primary_keys[0])
        lo = deserialize_row(meta.min_key, [key_type])[0]
        hi = deserialize_row(meta.max_key, [key_type])[0]
        if lo is None or hi is None:
            return True
        if pa.types.is_integer(first_keys.type) and pa.types.is_integer(key_type) and not first_keys.null_count:
            values = first_keys.to_numpy()
            return bool(((values >= lo) & (values <= hi)).any())
        low = pa.scalar(lo, key_type).cast(first_keys.type)
        high = pa.scalar(hi, key_type).cast(first_keys.type)
        inside: Any = pc.and_(pc.greater_equal(first_keys, low), pc.less_equal(first_keys, high))
        return bool(pc.any(inside).as_py())
    except Exception:  # statistics or types of an unexpected shape: read the file
        return True


def positions_of_keys(file_keys: pa.Table, wanted: pa.Table, keys: Sequence[str],
                      index: SortedIntegers | None = None) -> np.ndarray:
    """Sorted positions of the rows of `file_keys` whose key is one of `wanted`'s (`index`: the file's key
    column as a lookup file holds it, known to increase strictly)."""
    if len(keys) == 1:
        column = file_keys.column(keys[0])
        values = wanted.column(keys[0]).cast(column.type)
        if (pa.types.is_integer(column.type) or pa.types.is_temporal(column.type)) and column.null_count == 0 \
                and values.null_count == 0:
            # A data file holds its keys sorted and once each: a binary search per wanted key.
            sought = values.to_numpy()
            if index is None or index.values.dtype != sought.dtype:   # no copy, or one made before a type change
                stored = ascending_integers(column)
                index = None if stored is None else SortedIntegers(stored)
            if index is not None:
                found = index.positions(sought)
                # distinct wanted keys in ascending order (as read_rows_of_keys passes them) find ascending rows
                return found if len(found) < 2 or bool((found[1:] > found[:-1]).all()) else np.unique(found)
        mask = pc.is_in(column, value_set=values.combine_chunks())
        return np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    numbered = file_keys.append_column(_ROW, pa.array(np.arange(file_keys.num_rows, dtype=np.int64)))
    hits = numbered.join(wanted.select(list(keys)).cast(file_keys.schema), list(keys), join_type="left semi")
    return np.sort(hits.column(_ROW).to_numpy())


def _key_values(file_keys: pa.Table, name: str, type_: pa.DataType, rows: np.ndarray,
                copy: LookupCopy | None) -> pa.Array | pa.ChunkedArray:
    """The key column `name` at `rows`. Out of a lookup file's searched key column when it has one of this
    type: the search just read those values, while the file's own column of the key is still to be fetched
    from memory, a miss per row."""
    index = None if copy is None else copy.keys
    if index is not None and pa.types.is_integer(type_) and index.values.dtype == type_.to_pandas_dtype():
        return pa.array(index.values[rows], type=type_)
    return file_keys.column(name).take(rows)


def read_rows_of_keys(table: "Table", split: Split, columns: Sequence[str], schema: pa.Schema,
                      wanted: pa.Table) -> list[pa.Table]:
    """For each file of `split` that holds one of the keys of `wanted` (distinct rows of the trimmed primary
    keys), its rows of those keys, in file order, as `columns` typed by `schema` (which holds the keys).
    Files holding none of them are left out. A file's local lookup file answers where there is one (made on
    first use, lookup_files.py); the data file itself otherwise. Rows the split's deletion vectors delete are
    not returned (a lookup file holds them: a vector changes without its data file changing)."""
    keys = table.schema().trimmed_primary_keys
    current = table.schema()
    if len(keys) == 1 and ascending_integers(wanted.column(keys[0])) is None:
        wanted = wanted.sort_by(keys[0])   # once for every file: each file's search then needs no sort
    first = wanted.column(keys[0]).combine_chunks()
    rest = [c for c in columns if c not in keys]
    lookup_files = LookupFiles(table)
    deleted = read_deletion_files(table.io, split.deletion_files) if split.deletion_files else {}
    out = []
    for meta in split.files:
        if not may_hold_keys(table, meta, first):
            continue
        path = table.data_file_path(split.partition, split.bucket, meta)
        written = table.schema_by_id(meta.schema_id)
        copy = lookup_files.open(path, meta)
        key_columns = file_columns(current, written, keys)
        if copy is None:
            file_keys = read_data_file(table.io, path, key_columns, schema)
        else:
            file_keys = evolved(copy.data, key_columns, schema, path)
        rows = positions_of_keys(file_keys, wanted, keys, None if copy is None else copy.keys)
        vector = deleted.get(meta.file_name)
        if vector is not None and len(rows):
            rows = rows[~np.isin(rows, vector)]
        if len(rows) == 0:
            continue
        values = None
        if rest:
            take = pa.array(rows)
            rest_columns = file_columns(current, written, rest)
            if copy is None:
                values = read_data_file(table.io, path, rest_columns, schema, take)
            else:
                present = [n for n in rest_columns.to_read if n in copy.data.column_names]
                values = evolved(copy.take(present, take), rest_columns, schema, path)
        arrays = [values.column(c) if values is not None and c not in keys
                  else _key_values(file_keys, c, schema.field(c).type, rows, copy) for c in columns]
        out.append(pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(c) for c in columns])))
    if lookup_files.built:
        lookup_files.prune()
    return out


def read_split_of_keys(table: "Table", split: Split, columns: Sequence[str], wanted: pa.Table) -> pa.Table:
    """`read_split(table, split, columns)` of only the keys in `wanted` (rows of the trimmed primary keys): the
    merged row of each of those keys that has one.

    A key's merged row depends on that key's versions alone, so merging only the versions of the wanted keys
    gives exactly their rows of the whole split's merge, and the cost follows the keys asked for, not the bucket.
    A split with deletion vectors is read whole and then narrowed: a lookup file holds the rows a vector
    deletes."""
    if not table.is_primary_key:
        raise ValueError(f"{table.identifier} has no primary key: its rows cannot be read by key")
    keys = table.schema().trimmed_primary_keys
    wanted = wanted.select(keys).drop_null()
    if split.deletion_files is not None:
        rows = read_split(table, split, list(dict.fromkeys(list(columns) + keys)))
        found = positions_of_keys(rows.select(keys), wanted, keys)
        return rows.take(pa.array(found)).select(list(columns))
    needed, schema = merge_columns(table, columns), version_schema(table)
    # the parts come from a subsequence of the split's files: still oldest first, ordered if those are
    parts = read_rows_of_keys(table, split, needed, schema, wanted)
    merged = merge_versions(table, split.files, parts) if parts else \
        pa.schema([schema.field(c) for c in needed]).empty_table()
    return with_default_values(table, fill_partition(table, split, merged)).select(list(columns))
