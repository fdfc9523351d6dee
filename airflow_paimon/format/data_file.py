"""Data files: Parquet files with Paimon's layout, and the statistics manifests keep about them.

Primary-key tables store, per row: the trimmed primary key as `_KEY_<name>` columns, `_SEQUENCE_NUMBER`,
`_VALUE_KIND` (0 +I, 1 -U, 2 +U, 3 -D), then every column of the table; rows sorted by key. Append tables
store the table's columns only.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .binary_row import EMPTY_ROW, serialize_row
from .file_codec import FileCodec
from .fileio import FileIO
from .manifest import FILE_SOURCE_APPEND, DataFileMeta, SimpleStats
from .schema import (
    KEY_FIELD_PREFIX,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    TableSchema,
)
from .stats_modes import ColumnStats, StatsMode, StatsPolicy

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def new_data_file_name(prefix: str) -> str:
    """`prefix` (the table's data-file.prefix or changelog-file.prefix, as in Paimon) + a unique name."""
    return f"{prefix}{uuid.uuid4()}-0.parquet"


@dataclass
class EncodedFile:
    """A primary-key file written from memory and kept for a changelog made of its rows (changelog/lookup.py):
    its bytes, its description, and its value columns' statistics as computed (its description holds them
    serialised and perhaps truncated)."""
    data: bytes
    meta: DataFileMeta
    value_stats: list[ColumnStats]


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
    return _value_stats(column_stats(table, names, modes), names, types, dense)


def _value_stats(stats: list[ColumnStats], names: Sequence[str], types: Sequence[pa.DataType],
                 dense: bool) -> tuple[SimpleStats, tuple[str, ...] | None]:
    if not dense:
        return to_simple_stats(stats, types), None
    kept = [i for i, s in enumerate(stats) if s != (None, None, None)]
    if len(kept) == len(stats):
        return to_simple_stats(stats, types), None
    return (to_simple_stats([stats[i] for i in kept], [types[i] for i in kept]),
            tuple(names[i] for i in kept))


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


def _merged(a: ColumnStats, a_rows: int, b: ColumnStats, b_rows: int) -> ColumnStats:
    """The statistics of two sets of rows from each one's, under the same mode. Truncated bounds merge like exact
    ones: truncating keeps the order of values (a shorter prefix never sorts above its value, the raised
    prefix of a maximum never below it), so the bound of the merged bounds is the bound of all the rows. As
    Arrow's min_max, NaN is no bound while another value is."""
    low_a, high_a, nulls_a = a
    low_b, high_b, nulls_b = b
    nulls = None if nulls_a is None or nulls_b is None else nulls_a + nulls_b
    if nulls_a is not None and nulls_a == a_rows:     # only nulls: no bounds to merge
        return low_b, high_b, nulls
    if nulls_b is not None and nulls_b == b_rows:
        return low_a, high_a, nulls
    if low_a is None or high_a is None or low_b is None or high_b is None:
        return None, None, nulls
    low = low_b if _is_nan(low_a) else low_a if _is_nan(low_b) else min(low_a, low_b)
    high = high_b if _is_nan(high_a) else high_a if _is_nan(high_b) else max(high_a, high_b)
    return low, high, nulls


def empty_stats() -> SimpleStats:
    return SimpleStats(EMPTY_ROW, EMPTY_ROW, ())


def kv_file_schema(schema: TableSchema) -> pa.Schema:
    """The Parquet schema of a primary-key table's data files (built once per schema)."""
    return schema.kv_file_schema()


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


def _parquet_options(table: pa.Table, codec: FileCodec, unique_columns: Sequence[str],
                     dictionary: Sequence[str] | None) -> dict:
    """pyarrow's writer options for `write_parquet` and `encode_parquet`: one decision, so that a file encoded in
    memory is the file written straight to its store."""
    unique = set(unique_columns)
    if dictionary is None:
        dictionary = dictionary_columns(table, unique_columns)
    else:
        dictionary = [n for n in dictionary if n in table.column_names and n not in unique]
    encodings = {f.name: "DELTA_BINARY_PACKED" for f in table.schema
                 if f.name in unique and (pa.types.is_int32(f.type) or pa.types.is_int64(f.type))}
    return dict(compression=codec.name, compression_level=codec.level, write_statistics=True, store_schema=False,
                use_dictionary=dictionary, column_encoding=encodings or None, row_group_size=ROW_GROUP_ROWS)


def write_parquet(io: FileIO, path: str, table: pa.Table, codec: FileCodec,
                  unique_columns: Sequence[str] = (), dictionary: Sequence[str] | None = None) -> int:
    """Write one Parquet file; returns its size in bytes.

    Columns known to hold unique values (keys, sequence numbers) skip the dictionary attempt, which always fails
    for them and costs a third of the encoding, and integer ones are delta-encoded: sorted keys and consecutive
    sequence numbers shrink to almost nothing. Other columns that a sample shows nearly unique skip it too, unless
    `dictionary` names the columns to try (a decision already made on rows like these).
    """
    p = io.fs_path(path)
    io.make_parent(path)
    with io.fs.open_output_stream(p) as out:   # its size from the stream: no request to ask the store for it
        pq.write_table(table, out, **_parquet_options(table, codec, unique_columns, dictionary))
        return int(out.tell())


def encode_parquet(table: pa.Table, codec: FileCodec, unique_columns: Sequence[str] = (),
                   dictionary: Sequence[str] | None = None, *, statistics: bool = True) -> bytes:
    """The bytes `write_parquet` writes, in memory; without `statistics`, column chunks without Parquet
    statistics (see changelog/lookup.py: readers cannot skip them; the manifest's description is computed
    apart)."""
    sink = pa.BufferOutputStream()
    options = _parquet_options(table, codec, unique_columns, dictionary)
    options["write_statistics"] = statistics
    pq.write_table(table, sink, **options)
    return sink.getvalue().to_pybytes()


def write_encoded(io: FileIO, path: str, data: bytes) -> None:
    """Write a file encoded in memory as `write_parquet` writes one (a single stream, no temporary name: a data
    file is only read once a snapshot lists it)."""
    io.make_parent(path)
    with io.fs.open_output_stream(io.fs_path(path)) as out:
        out.write(data)


def kv_unique_columns(schema: TableSchema) -> list[str]:
    """The columns of a primary-key table's file that hold each value once: the key columns, the sequence number,
    and a single key's own column."""
    trimmed = schema.trimmed_primary_keys
    return [KEY_FIELD_PREFIX + k for k in trimmed] + [SEQUENCE_NUMBER] + (trimmed if len(trimmed) == 1 else [])


def kv_dictionary_columns(schema: TableSchema, rows: pa.Table, kinds: pa.Array) -> list[str]:
    """The columns of a primary-key table's file worth a dictionary, decided on `rows` (the table's columns) and
    their `kinds`: a write's data file and its changelog hold versions of the same rows, so one decision serves
    both (`write_kv_file`'s `dictionary`)."""
    values = rows.select(schema.field_names).append_column(VALUE_KIND, kinds)
    return dictionary_columns(values, kv_unique_columns(schema))


def kv_file_table(schema: TableSchema, rows: pa.Table, sequence: pa.Array | pa.ChunkedArray,
                  kinds: pa.Array) -> pa.Table:
    """A primary-key table's file layout of `rows` (the table's columns) with their sequence numbers and kinds."""
    columns = [rows.column(k) for k in schema.trimmed_primary_keys] + [sequence, kinds]
    columns += [rows.column(f.name) for f in schema.fields]
    return pa.Table.from_arrays(columns, schema=kv_file_schema(schema))


def write_kv_file(io: FileIO, bucket_dir: str, schema: TableSchema, rows: pa.Table, sequence: pa.Array,
                  kinds: pa.Array, codec: FileCodec, *, prefix: str, stats: StatsPolicy, level: int = 0,
                  changelog: bool = False, file_source: int = FILE_SOURCE_APPEND,
                  dictionary: Sequence[str] | None = None, keep: list[EncodedFile] | None = None) -> DataFileMeta:
    """Write rows (already sorted by key, unique per key) of one bucket as a level-`level` file named from
    `prefix`; with the changelog-file.prefix, a changelog file (same layout, keys sorted but repeated: a key's
    changes in order; `changelog` true, so that its statistics follow changelog-file.stats-mode). `dictionary`: the
    columns to try a dictionary on (`kv_dictionary_columns`), instead of deciding on a sample of `rows`. With
    `keep`, the file is encoded in memory and also appended to `keep` (a changelog reuses it)."""
    data = kv_file_table(schema, rows, sequence, kinds)
    name = new_data_file_name(prefix)
    path = f"{bucket_dir}/{name}"
    encoded = None
    if keep is None:
        size = write_parquet(io, path, data, codec, kv_unique_columns(schema), dictionary)
    else:
        encoded = encode_parquet(data, codec, kv_unique_columns(schema), dictionary)
        write_encoded(io, path, encoded)
        size = len(encoded)
    values: list[ColumnStats] = []
    meta = kv_file_meta(name, size, schema, rows, sequence, kinds, stats, level=level, changelog=changelog,
                        file_source=file_source, value_stats=values)
    if encoded is not None and keep is not None:
        keep.append(EncodedFile(encoded, meta, values))
    return meta


def kv_file_meta(name: str, size: int, schema: TableSchema, rows: pa.Table, sequence: pa.Array,
                 kinds: pa.Array, stats: StatsPolicy, *, level: int = 0, changelog: bool = False,
                 file_source: int = FILE_SOURCE_APPEND, then: EncodedFile | None = None,
                 value_stats: list[ColumnStats] | None = None) -> DataFileMeta:
    """The manifest's description of a primary-key table's file of `rows` (sorted by key), and, with `then`,
    followed by every row of that file: a file of this table whose columns keep the same statistics and whose
    keys include all of `rows`' (a spliced changelog, changelog/lookup.py). Its description is merged in, not
    computed again from its rows. `value_stats` receives the statistics of `rows`' value columns."""
    file_schema = kv_file_schema(schema)
    trimmed = schema.trimmed_primary_keys
    key_types = [schema.arrow_type(k) for k in trimmed]
    value_names = schema.field_names
    value_types = [schema.arrow_type(n) for n in value_names]
    n = rows.num_rows
    modes = stats.column_modes(file_schema.names, stats.file_mode(level, changelog))
    values = column_stats(rows, value_names, modes[len(trimmed) + 2:])
    if value_stats is not None:
        value_stats[:] = values
    seq_mm = pc.min_max(sequence)
    low, high = seq_mm["min"].as_py(), seq_mm["max"].as_py()
    codes = np.asarray(kinds)
    deletes = int(np.count_nonzero((codes == UPDATE_BEFORE) | (codes == DELETE)))
    if then is None:
        min_key = serialize_row([rows.column(k)[0].as_py() for k in trimmed], key_types)
        max_key = serialize_row([rows.column(k)[n - 1].as_py() for k in trimmed], key_types)
        key_stats = to_simple_stats(column_stats(rows, trimmed, modes[:len(trimmed)]), key_types)
    else:
        # the keys of `rows` are among `then`'s (never null): its key range and key statistics are the file's
        kept = then.meta
        min_key, max_key, key_stats = kept.min_key, kept.max_key, kept.key_stats
        values = [_merged(a, n, b, kept.row_count) for a, b in zip(values, then.value_stats)]
        low = kept.min_sequence_number if low is None else min(low, kept.min_sequence_number)
        high = kept.max_sequence_number if high is None else max(high, kept.max_sequence_number)
        deletes += kept.delete_row_count or 0
        n += kept.row_count
    value_summary, stats_columns = _value_stats(values, value_names, value_types, stats.dense)
    return DataFileMeta(
        file_name=name,
        file_size=size,
        row_count=n,
        min_key=min_key,
        max_key=max_key,
        key_stats=key_stats,
        value_stats=value_summary,
        min_sequence_number=low,
        max_sequence_number=high,
        schema_id=schema.id,
        level=level,
        extra_files=(),
        creation_time_ms=int(time.time() * 1000),
        delete_row_count=deletes,
        file_source=file_source,
        value_stats_cols=stats_columns,
    )


def write_append_file(io: FileIO, bucket_dir: str, schema: TableSchema, rows: pa.Table, first_sequence: int,
                      codec: FileCodec, *, prefix: str, stats: StatsPolicy,
                      file_source: int = FILE_SOURCE_APPEND) -> DataFileMeta:
    data = rows.cast(schema.arrow_schema())
    name = new_data_file_name(prefix)
    size = write_parquet(io, f"{bucket_dir}/{name}", data, codec)
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
