"""Data files: Parquet files with Paimon's layout, and the statistics manifests keep about them.

Primary-key tables store, per row: the trimmed primary key as `_KEY_<name>` columns, `_SEQUENCE_NUMBER`,
`_VALUE_KIND` (0 +I, 1 -U, 2 +U, 3 -D), then every column of the table; rows sorted by key. Append tables
store the table's columns only.
"""

from __future__ import annotations

import time
import uuid
from functools import lru_cache
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .binary_row import EMPTY_ROW, serialize_row
from .fileio import FileIO
from .manifest import FILE_SOURCE_APPEND, DataFileMeta, SimpleStats
from .schema import (
    KEY_FIELD_ID_START,
    KEY_FIELD_PREFIX,
    SEQUENCE_NUMBER,
    SEQUENCE_NUMBER_ID,
    VALUE_KIND,
    VALUE_KIND_ID,
    TableSchema,
)
from .stats_modes import ColumnStats, StatsMode, StatsPolicy

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def new_data_file_name(prefix: str) -> str:
    """`prefix` (the table's data-file.prefix or changelog-file.prefix, as in Paimon) + a unique name."""
    return f"{prefix}{uuid.uuid4()}-0.parquet"


def column_stats(table: pa.Table, names: Sequence[str], modes: Sequence[StatsMode]) -> list[ColumnStats]:
    """Each named column's statistics as its mode keeps them. ARRAY, MAP and ROW columns keep none (Paimon reads
    them from the Parquet footer by column name, which their leaves do not have)."""
    out: list[ColumnStats] = []
    for name, mode in zip(names, modes):
        col = table.column(name)
        if mode.kind == "none" or pa.types.is_nested(col.type):
            out.append((None, None, None))
        elif mode.kind == "counts" or len(col) == col.null_count:
            out.append((None, None, col.null_count))
        else:
            mm = pc.min_max(col)
            out.append(mode.apply(mm["min"].as_py(), mm["max"].as_py(), col.null_count))
    return out


def to_simple_stats(stats: Sequence[ColumnStats], types: Sequence[pa.DataType]) -> SimpleStats:
    return SimpleStats(serialize_row([s[0] for s in stats], list(types)),
                       serialize_row([s[1] for s in stats], list(types)), tuple(s[2] for s in stats))


def value_stats(table: pa.Table, names: Sequence[str], types: Sequence[pa.DataType], modes: Sequence[StatsMode],
                dense: bool) -> tuple[SimpleStats, tuple[str, ...] | None]:
    """A file's value statistics and the columns they describe (None: all of them). Dense (Paimon's
    metadata.stats-dense-store), the columns that keep nothing are left out."""
    stats = column_stats(table, names, modes)
    if not dense:
        return to_simple_stats(stats, types), None
    kept = [i for i, s in enumerate(stats) if s != (None, None, None)]
    if len(kept) == len(stats):
        return to_simple_stats(stats, types), None
    return (to_simple_stats([stats[i] for i in kept], [types[i] for i in kept]),
            tuple(names[i] for i in kept))


def empty_stats() -> SimpleStats:
    return SimpleStats(EMPTY_ROW, EMPTY_ROW, ())


def kv_file_schema(schema: TableSchema) -> pa.Schema:
    """The Parquet schema of a primary-key table's data files."""
    value = schema.arrow_schema()
    fields = []
    for k in schema.trimmed_primary_keys:
        field_id = schema.field(k).id
        fields.append(pa.field(KEY_FIELD_PREFIX + k, value.field(k).type, nullable=False,
                               metadata={b"PARQUET:field_id": str(KEY_FIELD_ID_START + field_id).encode()}))
    fields.append(pa.field(SEQUENCE_NUMBER, pa.int64(), nullable=False,
                           metadata={b"PARQUET:field_id": str(SEQUENCE_NUMBER_ID).encode()}))
    fields.append(pa.field(VALUE_KIND, pa.int8(), nullable=False,
                           metadata={b"PARQUET:field_id": str(VALUE_KIND_ID).encode()}))
    keys = set(schema.primary_keys)
    for f in value:
        # Delete rows carry only their key, so non-key columns are stored nullable.
        fields.append(f if f.name in keys else f.with_nullable(True))
    return pa.schema(fields)


DICTIONARY_SAMPLE = 2048
# Arrow's default dictionary page limit: a dictionary that outgrows it is dropped for plain encoding, after the
# writer paid for building it.
DICTIONARY_PAGE_LIMIT = 1024 * 1024
_SAMPLE_SEED = 20260317


@lru_cache(maxsize=256)
def _sample_rows(n: int) -> np.ndarray | None:
    """The rows a file of `n` rows samples in every column (None: a small file is read whole). The same `n`
    gives the same rows, so they are drawn once: seeding a generator costs more than the sample's whole use in a
    bucket of a write, which asks again for each of its files. Read-only, as it is shared."""
    if n <= DICTIONARY_SAMPLE:
        return None
    rows = np.unique(np.random.default_rng(_SAMPLE_SEED).integers(0, n, DICTIONARY_SAMPLE))
    rows.flags.writeable = False
    return rows


def _nearly_unique(col: pa.ChunkedArray, sample_rows: np.ndarray | None) -> bool:
    """Whether a column has so many distinct values that a dictionary costs more than it saves: estimated from
    the repeats in a random sample of its rows (all of them in a small file) by the birthday bound, at least 90%
    of the rows distinct (the dictionary would hold nearly every value and add an index per row: measured, a
    12,500-row file of unique strings a fifth larger and a third slower to write), or too many distinct values
    for the dictionary page (the writer would fall back to plain encoding after building it). A random sample,
    not an evenly spaced one, so that values repeating with a period cannot look unique."""
    n = len(col)
    if n == 0 or pa.types.is_nested(col.type) or pa.types.is_boolean(col.type):
        return False
    sample = col if sample_rows is None else col.take(sample_rows)
    present = len(sample) - sample.null_count
    if present == 0:
        return False
    repeats = present - pc.count_distinct(sample).as_py()
    if sample is col:
        distinct = float(present - repeats)
    else:
        distinct = float(n) if repeats == 0 else min(float(n), present * present / (2.0 * repeats))
    width = col.type.byte_width if pa.types.is_primitive(col.type) else max(1, col.nbytes // n)
    return distinct >= 0.9 * (n - col.null_count) or distinct * width > DICTIONARY_PAGE_LIMIT


ROW_GROUP_ROWS = 131_072
"""Rows per Parquet row group of the files written here. A merge-on-read skips the row groups of older files whose
every row a newer file replaced (read.py), so groups much smaller than a file pay off; much smaller ones would
cost statistics, pages and compression. DuckDB writes 122,880 rows per group."""


def dictionary_columns(table: pa.Table, unique_columns: Sequence[str] = ()) -> list[str]:
    """The columns of `table` worth a dictionary: not known to be unique (keys, sequence numbers), and not nearly
    unique in a sample of the rows."""
    unique = set(unique_columns)
    rows = _sample_rows(table.num_rows)
    return [n for n in table.column_names if n not in unique and not _nearly_unique(table.column(n), rows)]


def write_parquet(io: FileIO, path: str, table: pa.Table, compression: str,
                  unique_columns: Sequence[str] = (), dictionary: Sequence[str] | None = None) -> int:
    """Write one Parquet file; returns its size in bytes.

    Columns known to hold unique values (keys, sequence numbers) skip the dictionary attempt, which always fails
    for them and costs a third of the encoding, and integer ones are delta-encoded: sorted keys and consecutive
    sequence numbers shrink to almost nothing. Other columns that a sample shows nearly unique skip it too, unless
    `dictionary` names the columns to try (a decision already made on rows like these).
    """
    p = io.fs_path(path)
    io.make_parent(path)
    unique = set(unique_columns)
    if dictionary is None:
        dictionary = dictionary_columns(table, unique_columns)
    else:
        dictionary = [n for n in dictionary if n in table.column_names and n not in unique]
    encodings = {f.name: "DELTA_BINARY_PACKED" for f in table.schema
                 if f.name in unique and (pa.types.is_int32(f.type) or pa.types.is_int64(f.type))}
    # The stubs know only lower-case codec names (pyarrow takes any case) and only a bool for use_dictionary
    # (pyarrow also takes the list of columns to try dictionaries on).
    with io.fs.open_output_stream(p) as out:   # its size from the stream: no request to ask the store for it
        pq.write_table(table, out, compression=compression,  # type: ignore[arg-type]
                       write_statistics=True, store_schema=False,
                       use_dictionary=dictionary,  # type: ignore[arg-type]
                       column_encoding=encodings or None, row_group_size=ROW_GROUP_ROWS)
        return int(out.tell())


def _kv_unique_columns(schema: TableSchema) -> list[str]:
    """The columns of a primary-key table's file that hold each value once: the key columns, the sequence number,
    and a single key's own column."""
    trimmed = schema.trimmed_primary_keys
    return [KEY_FIELD_PREFIX + k for k in trimmed] + [SEQUENCE_NUMBER] + (trimmed if len(trimmed) == 1 else [])


def kv_dictionary_columns(schema: TableSchema, rows: pa.Table, kinds: pa.Array) -> list[str]:
    """The columns of a primary-key table's file worth a dictionary, decided on `rows` (the table's columns) and
    their `kinds`: a write's data file and its changelog hold versions of the same rows, so one decision serves
    both (`write_kv_file`'s `dictionary`)."""
    values = rows.select(schema.field_names).append_column(VALUE_KIND, kinds)
    return dictionary_columns(values, _kv_unique_columns(schema))


def write_kv_file(io: FileIO, bucket_dir: str, schema: TableSchema, rows: pa.Table, sequence: pa.Array,
                  kinds: pa.Array, compression: str, *, prefix: str, stats: StatsPolicy, level: int = 0,
                  changelog: bool = False, file_source: int = FILE_SOURCE_APPEND,
                  dictionary: Sequence[str] | None = None) -> DataFileMeta:
    """Write rows (already sorted by key, unique per key) of one bucket as a level-`level` file named from
    `prefix`; with the changelog-file.prefix, a changelog file (same layout, keys sorted but repeated: a key's
    changes in order; `changelog` true, so that its statistics follow changelog-file.stats-mode). `dictionary`: the
    columns to try a dictionary on (`kv_dictionary_columns`), instead of deciding on a sample of `rows`."""
    file_schema = kv_file_schema(schema)
    trimmed = schema.trimmed_primary_keys
    columns = [rows.column(k) for k in trimmed] + [sequence, kinds]
    columns += [rows.column(f.name) for f in schema.fields]
    data = pa.Table.from_arrays(columns, schema=file_schema)
    name = new_data_file_name(prefix)
    size = write_parquet(io, f"{bucket_dir}/{name}", data, compression, _kv_unique_columns(schema), dictionary)
    key_types = [schema.arrow_type(k) for k in trimmed]
    value_names = schema.field_names
    value_types = [schema.arrow_type(n) for n in value_names]
    n = rows.num_rows
    first = [rows.column(k)[0].as_py() for k in trimmed]
    last = [rows.column(k)[n - 1].as_py() for k in trimmed]
    modes = stats.column_modes(file_schema.names, stats.file_mode(level, changelog))
    keys = column_stats(rows, trimmed, modes[:len(trimmed)])
    values, stats_columns = value_stats(rows, value_names, value_types, modes[len(trimmed) + 2:], stats.dense)
    seq_mm = pc.min_max(sequence)
    retractions = pc.is_in(kinds, value_set=pa.array([UPDATE_BEFORE, DELETE], kinds.type))
    deletes = retractions.true_count
    return DataFileMeta(
        file_name=name,
        file_size=size,
        row_count=n,
        min_key=serialize_row(first, key_types),
        max_key=serialize_row(last, key_types),
        key_stats=to_simple_stats(keys, key_types),
        value_stats=values,
        min_sequence_number=seq_mm["min"].as_py(),
        max_sequence_number=seq_mm["max"].as_py(),
        schema_id=schema.id,
        level=level,
        extra_files=(),
        creation_time_ms=int(time.time() * 1000),
        delete_row_count=deletes,
        file_source=file_source,
        value_stats_cols=stats_columns,
    )


def write_append_file(io: FileIO, bucket_dir: str, schema: TableSchema, rows: pa.Table, first_sequence: int,
                      compression: str, *, prefix: str, stats: StatsPolicy,
                      file_source: int = FILE_SOURCE_APPEND) -> DataFileMeta:
    data = rows.cast(schema.arrow_schema())
    name = new_data_file_name(prefix)
    size = write_parquet(io, f"{bucket_dir}/{name}", data, compression)
    value_names = schema.field_names
    value_types = [schema.arrow_type(n) for n in value_names]
    values, stats_columns = value_stats(rows, value_names, value_types,
                                        stats.column_modes(value_names, stats.file_mode(None)), stats.dense)
    return DataFileMeta(
        file_name=name,
        file_size=size,
        row_count=rows.num_rows,
        min_key=EMPTY_ROW,
        max_key=EMPTY_ROW,
        key_stats=empty_stats(),
        value_stats=values,
        min_sequence_number=first_sequence,
        max_sequence_number=first_sequence + rows.num_rows - 1,
        schema_id=schema.id,
        level=0,
        extra_files=(),
        creation_time_ms=int(time.time() * 1000),
        delete_row_count=0,
        file_source=file_source,
        value_stats_cols=stats_columns,
    )
