"""Reading splits: merge-on-read for primary-key tables, plain concatenation for append tables.

For a primary-key bucket, the newest version of each key wins (by `sequence.field` in Paimon's order, then the
highest `_SEQUENCE_NUMBER`: versions.py); keys whose newest version is a retraction (-U/-D) disappear, and with
`ignore-delete` retractions are skipped. All of it is one sort and a
few vector comparisons over the bucket's rows: no per-row Python.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .data_file import DELETE, UPDATE_BEFORE
from .deletion_vectors import keep_mask, read_deletion_files
from .errors import InvalidOptionError
from .evolution import DataFileReader, file_columns, read_data_file
from .kernels import last_of_each_key
from .scan import Split
from .schema import SEQUENCE_NUMBER, VALUE_KIND
from .versions import version_sort_indices

if TYPE_CHECKING:
    import pyarrow.dataset as ds

    from .manifest import DataFileMeta
    from .table import Table


def read_files(table: "Table", split: Split, columns: list[str], schema: pa.Schema,
               positions: str | None = None) -> list[pa.Table]:
    """Each file's `columns` in `schema`'s types, found in the file by field id (see evolution.py); on a
    deletion-vector table without the rows the split's vectors delete. `positions`: the name of a column added
    with each row's position in its file, which is what a deletion vector marks."""
    current = table.schema()
    vectors = read_deletion_files(table.io, split.deletion_files) if split.deletion_files else {}
    out = []
    for meta in split.files:
        path = table.data_file_path(split.partition, split.bucket, meta)
        where = file_columns(current, table.schema_by_id(meta.schema_id), columns)
        data = read_data_file(table.io, path, where, schema)
        if positions is not None:
            data = data.append_column(positions, pa.array(np.arange(data.num_rows, dtype=np.int64)))
        keep = keep_mask(data.num_rows, vectors.get(meta.file_name))
        out.append(data if keep is None else data.filter(pa.array(keep)))
    return out


def deletion_vector_split(table: "Table", split: Split) -> Split:
    """What a batch read of a deletion-vector primary-key table reads, as Paimon's: level-0 files (not yet
    compacted, so their rows have not been applied to the vectors) are left out unless
    `deletion-vectors.merge-on-read` asks to merge them."""
    if table.core_options.deletion_vectors_merge_on_read or all(f.level > 0 for f in split.files):
        return split
    return dataclasses.replace(split, files=[f for f in split.files if f.level > 0])


def fill_partition(table: "Table", split: Split, data: pa.Table) -> pa.Table:
    """Partition columns missing from (or null in) old files take the split's partition values."""
    for name, value in zip(table.schema().partition_keys, split.partition):
        if name in data.column_names and data.column(name).null_count == data.num_rows and value is not None:
            idx = data.column_names.index(name)
            data = data.set_column(idx, name, pa.array([value] * data.num_rows, type=data.schema.field(name).type))
    return data


def with_default_values(table: "Table", data: pa.Table) -> pa.Table:
    """NULLs of the columns with a `fields.<name>.default-value` as that value, cast from its text: Paimon's
    reader puts it there after merging and before filtering (DefaultValueAssigner); the files keep the NULL."""
    for name, text in table.core_options.field_default_values.items():
        if name not in data.column_names or not data.column(name).null_count:
            continue
        column = data.column(name)
        try:
            value = pa.scalar(text).cast(column.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InvalidOptionError(f"fields.{name}.default-value: {text!r} is not a {column.type} value ({e})") \
                from None
        data = data.set_column(data.column_names.index(name), name, pc.fill_null(column, value))
    return data


def version_schema(table: "Table") -> pa.Schema:
    """A primary-key table's rows as merges read them from data files: the table's columns (nullable: a delete
    row carries only its key), then `_SEQUENCE_NUMBER` and `_VALUE_KIND`."""
    logical = table.schema().logical_arrow_schema()
    return pa.schema([f.with_nullable(True) for f in logical] +
                     [pa.field(SEQUENCE_NUMBER, pa.int64()), pa.field(VALUE_KIND, pa.int8())])


def merge_columns(table: "Table", names: Sequence[str]) -> list[str]:
    """What a merge of `names` reads of each file: those columns, what merging needs (keys, `sequence.field`,
    partition columns), then the system columns."""
    schema = table.schema()
    wanted = [n for n in names if n not in (SEQUENCE_NUMBER, VALUE_KIND)]
    return list(dict.fromkeys(wanted + schema.trimmed_primary_keys + list(table.core_options.sequence_fields) +
                              list(schema.partition_keys))) + [SEQUENCE_NUMBER, VALUE_KIND]


def merge_versions(table: "Table", files: Sequence[DataFileMeta], parts: list[pa.Table]) -> pa.Table:
    """`merge_on_read` of the rows `parts` read from `files` (oldest first), as the table's options ask."""
    ordered = all(a.max_sequence_number < b.min_sequence_number for a, b in zip(files, files[1:]))
    options = table.core_options
    return merge_on_read(parts, table.schema().trimmed_primary_keys, list(options.sequence_fields), ordered, True,
                         seq_descending=options.sequence_descending, ignore_delete=options.ignore_delete)


def _newest_of_runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, keep): the rows of key-sorted runs concatenated oldest first, ordered by key, and the mask of the
    newest version of each key in that order. A stable sort on the key alone leaves each key's versions in
    sequence order; timsort merges the pre-sorted runs in linear time. Key columns hold no nulls."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    keep = np.ones(len(order), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=keep[:-1])
    return order, keep


def merge_on_read(parts: list[pa.Table], keys: Sequence[str], seq_fields: Sequence[str],
                  ordered_runs: bool, has_retractions: bool = True, *, seq_descending: bool = False,
                  ignore_delete: bool = False) -> pa.Table:
    """Newest row per key out of `parts` (files ordered oldest first), retractions dropped.

    Versions are ordered as Paimon orders them (versions.py); with `ignore_delete` retractions are skipped before
    choosing, so the newest insert or update-after of a key wins, as in Paimon's deduplicate merge function."""
    data = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if ignore_delete and has_retractions and data.num_rows:
        kinds = data.column(VALUE_KIND)
        retract = pc.is_in(kinds, value_set=pa.array([UPDATE_BEFORE, DELETE], kinds.type))
        if pc.any(retract).as_py():
            data = data.filter(pc.invert(retract))
        has_retractions = False
    n = data.num_rows
    if n == 0:
        return data
    int_key = len(keys) == 1 and pa.types.is_integer(data.schema.field(keys[0]).type)
    if len(parts) == 1 and not seq_fields:
        order = None  # a data file holds each key once, sorted
        keep = last_of_each_key([data.column(k) for k in keys], n)
    elif ordered_runs and not seq_fields and int_key:
        order, keep = _newest_of_runs(data.column(keys[0]).to_numpy())
    else:
        order = version_sort_indices(data, keys, seq_fields, seq_descending, [SEQUENCE_NUMBER])
        keep = last_of_each_key([data.column(k).take(order) for k in keys], n)
    if has_retractions:
        kind_values = data.column(VALUE_KIND).to_numpy()
        if order is not None:
            kind_values = kind_values[order]
        keep &= (kind_values != UPDATE_BEFORE) & (kind_values != DELETE)
    if order is None:
        return data if keep.all() else data.filter(pa.array(keep))
    return take_rows(data, order[keep])


MAX_SLICED_RUNS = 64
"""Up to this many runs of consecutive rows, a merge's result is made of zero-copy slices of the files' rows."""


def take_rows(data: pa.Table, rows: np.ndarray) -> pa.Table:
    """`data.take(rows)`, but without copying when `rows` is a few runs of consecutive rows: merging an
    increment of new keys (or of keys in one range) into older files keeps long stretches of each file, which a
    gather would copy value by value (strings are dear) for nothing."""
    if len(rows) == 0:
        return data.slice(0, 0)
    breaks = np.flatnonzero(rows[1:] != rows[:-1] + 1) + 1
    if len(breaks) >= MAX_SLICED_RUNS:
        return data.take(pa.array(rows))
    starts = np.concatenate(([0], breaks)).tolist()
    ends = np.concatenate((breaks, [len(rows)])).tolist()
    first = rows[starts].tolist()
    pieces = [data.slice(row, end - start) for row, start, end in zip(first, starts, ends)]
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


def merge_ordered_runs(table: "Table", split: Split, columns: list[str], schema: pa.Schema, key: str) -> pa.Table:
    """`merge_on_read` of files whose sequence numbers are ordered, oldest first, keyed by one integer column
    (no `sequence.field`): the newest row of each key, retractions dropped, `columns` plus `_VALUE_KIND`.

    The key and row kind of every file are read and merged first; the other columns are then read only from the
    row groups that hold a surviving row. A row group whose every key a newer file rewrote (or retracted) is never
    decoded: an increment that rewrites a range of keys (often the recent ones) spares the older files' groups in
    that range."""
    current = table.schema()
    first = [key, VALUE_KIND]
    rest = [c for c in columns if c not in first]
    with ExitStack() as stack:
        readers = [stack.enter_context(DataFileReader(table.io, table.data_file_path(split.partition, split.bucket,
                                                                                     meta)))
                   for meta in split.files]
        written = [table.schema_by_id(meta.schema_id) for meta in split.files]
        group_sizes = [r.group_rows for r in readers]
        if all(len(groups) <= 1 for groups in group_sizes):
            # whole files (as Paimon's writers make them, one group up to 128 MB): one read each, then the merge
            return merge_on_read([r.read(file_columns(current, w, first + rest), schema)
                                  for r, w in zip(readers, written)], [key], [], True)
        keyed = pa.concat_tables([r.read(file_columns(current, w, first), schema) for r, w in zip(readers, written)])
        order, keep = _newest_of_runs(keyed.column(key).to_numpy())
        kinds = keyed.column(VALUE_KIND).to_numpy()[order]
        keep &= (kinds != UPDATE_BEFORE) & (kinds != DELETE)
        rows = order[keep]   # positions in the files' rows, concatenated oldest first
        if not rest:
            return take_rows(keyed, rows)
        sizes = np.array([n for per_file in group_sizes for n in per_file], dtype=np.int64)  # all files' groups
        live = np.zeros(len(order), dtype=bool)
        live[rows] = True
        wanted = np.zeros(len(sizes), dtype=bool)
        filled = sizes > 0   # (a writer may leave an empty group: reduceat must not start one past the end)
        if filled.any():
            wanted[filled] = np.logical_or.reduceat(live, np.concatenate(([0], np.cumsum(sizes)[:-1]))[filled])
        skipped = np.where(wanted, 0, sizes)
        # the same rows among the groups read: less the rows of the groups skipped before each
        positions = rows - np.repeat(np.cumsum(skipped) - skipped, sizes)[rows]
        parts, first_group = [], 0
        for reader, w, groups in zip(readers, written, group_sizes):
            mine = np.flatnonzero(wanted[first_group:first_group + len(groups)])
            first_group += len(groups)
            if len(mine):
                parts.append(reader.read(file_columns(current, w, rest), schema,
                                         None if len(mine) == len(groups) else mine.tolist()))
    others = pa.concat_tables(parts) if parts else pa.schema([schema.field(c) for c in rest]).empty_table()
    merged_keys, merged_others = take_rows(keyed, rows), take_rows(others, positions)
    return pa.Table.from_arrays(merged_keys.columns + merged_others.columns,
                                names=merged_keys.column_names + merged_others.column_names)


FilesReader = Callable[["Table", Split, list[str], pa.Schema], list[pa.Table]]


def read_split(table: "Table", split: Split, columns: Sequence[str] | None = None,
               filter: ds.Expression | None = None, files_reader: FilesReader = read_files) -> pa.Table:
    """Rows of one split, merged, filtered and projected. `files_reader` reads the files' rows (`read_files`'s
    contract): a diff passes one that reads only a range of keys (changes/slices.py)."""
    schema = table.schema()
    logical = schema.logical_arrow_schema()
    wanted = list(columns) if columns is not None else logical.names
    needed = list(wanted)
    if filter is not None:
        needed += [n for n in logical.names if n not in needed and n in str(filter)]
    if table.is_primary_key and split.deletion_files is not None:
        split = deletion_vector_split(table, split)
    if not split.files:
        return logical.empty_table().select(wanted)
    raw = split.deletion_files is not None and not table.core_options.deletion_vectors_merge_on_read
    if table.is_primary_key and raw:
        # The vectors leave one live row per key in the files above level 0: no merge (Paimon's raw read). Files
        # that record retractions, or do not say, are read with their row kinds and the retractions dropped.
        unsure = any(f.delete_row_count is None or f.delete_row_count > 0 for f in split.files)
        kind_field = [pa.field(VALUE_KIND, pa.int8())] if unsure else []
        # a row's sequence number when asked for (a lookup MERGE's before-images carry it)
        sequence_field = [pa.field(SEQUENCE_NUMBER, pa.int64())] if SEQUENCE_NUMBER in needed else []
        parts = files_reader(table, split, needed + [f.name for f in kind_field],
                             pa.schema([f.with_nullable(True) for f in logical] + sequence_field + kind_field))
        data = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if unsure:
            kinds = data.column(VALUE_KIND)
            retract = pc.is_in(kinds, value_set=pa.array([UPDATE_BEFORE, DELETE], kinds.type))
            if pc.any(retract).as_py():
                data = data.filter(pc.invert(retract))
    elif table.is_primary_key:
        keys = schema.trimmed_primary_keys
        seq_fields = list(table.core_options.sequence_fields)
        for n in keys + seq_fields + [k for k in schema.partition_keys]:
            if n not in needed:
                needed.append(n)
        file_schema = version_schema(table)
        ordered = all(a.max_sequence_number < b.min_sequence_number for a, b in zip(split.files, split.files[1:]))
        # Sequence numbers are only compared when the file order alone cannot decide (see merge_on_read).
        key_sort_suffices = not seq_fields and (
            len(split.files) == 1
            or (ordered and len(keys) == 1 and pa.types.is_integer(logical.field(keys[0]).type)))
        system = [VALUE_KIND] if key_sort_suffices else [SEQUENCE_NUMBER, VALUE_KIND]
        options = table.core_options
        if key_sort_suffices and len(split.files) > 1 and not options.ignore_delete \
                and split.deletion_files is None and files_reader is read_files:
            data = merge_ordered_runs(table, split, needed, file_schema, keys[0])
        else:
            parts = files_reader(table, split, needed + [c for c in system if c not in needed], file_schema)
            # delete_row_count is not trustworthy: some writers record 0 for files holding -D rows.
            data = merge_versions(table, split.files, parts)
    else:
        parts = files_reader(table, split, needed, logical)
        data = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    data = with_default_values(table, fill_partition(table, split, data))
    if filter is not None:
        data = data.filter(filter)
    return data.select(wanted)


def read_splits(table: "Table", splits: list[Split], columns: Sequence[str] | None = None,
                filter: ds.Expression | None = None, max_workers: int = 4) -> pa.Table:
    schema = table.schema().logical_arrow_schema()
    wanted = list(columns) if columns is not None else schema.names
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        from .errors import SchemaMismatchError
        raise SchemaMismatchError(f"columns {unknown} are not in the table schema {schema.names}")
    if not splits:
        return schema.empty_table().select(wanted)
    if len(splits) == 1:
        parts = [read_split(table, splits[0], wanted, filter)]
    else:
        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            parts = list(pool.map(lambda s: read_split(table, s, wanted, filter), splits))
    target = pa.schema([schema.field(c) for c in wanted])
    return pa.concat_tables([p.cast(target) if p.schema != target else p for p in parts])
