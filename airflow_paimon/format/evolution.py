"""Data files written under older schemas, read as the table's current schema: columns matched by field id.

A Paimon table's columns have ids (`fields[].id` of `schema/schema-N`) and each data file records the schema it
was written with (`_SCHEMA_ID` of its manifest entry). A column keeps its id through a rename and a type change;
a dropped column's id is never used again, so a column added later under the same name is a new column. Reading a
file therefore looks each wanted column up by id in the file's own schema, as Paimon's `SchemaEvolutionUtil`
does: found, it is read under the file's name for it and cast to the current type; not found (added after the
file was written), it reads as NULL. Matching by name instead would read a renamed column as NULL and bring a
dropped column's old values back under a re-added name.

Everything is done per column on whole Arrow arrays: select, rename, cast.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import UnsupportedTableError
from .fileio import FileIO
from .schema import TableSchema

__all__ = ["DataFileReader", "FileColumns", "file_columns", "read_data_file", "evolved", "cast_evolved",
           "monotonic_cast"]


@dataclass(frozen=True)
class FileColumns:
    """How the wanted table columns are found in one file: `sources[i]` is the file's name for `names[i]`
    (None: the file has no such column, it reads as NULL)."""

    names: tuple[str, ...]
    sources: tuple[str | None, ...]

    @property
    def to_read(self) -> list[str]:
        return [s for s in self.sources if s is not None]


def file_columns(table_schema: TableSchema, file_schema: TableSchema, names: Sequence[str]) -> FileColumns:
    """Where each of `names` (current column names, or system columns such as `_SEQUENCE_NUMBER`, which keep
    their names) lives in a file written under `file_schema`."""
    if file_schema.id == table_schema.id:
        return FileColumns(tuple(names), tuple(names))
    current = {f.name: f.id for f in table_schema.fields}
    in_file = {f.id: f.name for f in file_schema.fields}
    sources = []
    for n in names:
        field_id = current.get(n)
        sources.append(n if field_id is None else in_file.get(field_id))
    return FileColumns(tuple(names), tuple(sources))


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def monotonic_cast(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether casting keeps the order of values (so min/max statistics stay bounds after the cast)."""
    if source == target:
        return True
    if _numeric(source) and _numeric(target):
        return True
    return pa.types.is_timestamp(source) and pa.types.is_timestamp(target)


def cast_evolved(column: pa.ChunkedArray | pa.Array, target: pa.DataType, name: str,
                 where: str) -> pa.ChunkedArray | pa.Array:
    """`column` as `target`. Lossless casts first; numbers and timestamps that do not fit are converted as Java
    Paimon's cast executors do (narrowed, rounded, truncated), which is what an explicit type change written by
    another engine means. Anything else that does not cast is a clear error naming the file and column."""
    if column.type == target:
        return column
    try:
        return pc.cast(column, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        if monotonic_cast(column.type, target):
            try:
                return pc.cast(column, target, safe=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        raise UnsupportedTableError(
            f"{where}: column {name!r} was written as {column.type} and cannot be read as {target} ({e})") from None


# A dictionary page this small was not cut short by the writer's dictionary size limit (1 MiB in Paimon's and
# pyarrow's writers), so the chunk's pages are all dictionary-encoded: read as a dictionary it costs its indices.
_SMALL_DICTIONARY = 64 * 1024


def _dictionary_columns(parquet: pq.ParquetFile, names: list[str]) -> list[str]:
    """The string/binary columns of `names` whose every chunk is a small dictionary plus its indices.

    Reading such a column as a dictionary and decoding only the rows taken avoids decoding every value of the
    file; a chunk that fell back to plain pages would instead be hashed back into a dictionary, which is slower
    than a plain read, so any doubt keeps the plain read."""
    meta = parquet.metadata
    schema = parquet.schema_arrow
    out = []
    for name in names:
        field = schema.field(name)
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
                or pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)):
            continue
        index = schema.get_field_index(name)
        chunks = [meta.row_group(g).column(index) for g in range(meta.num_row_groups)]
        if chunks and all(c.has_dictionary_page and c.dictionary_page_offset is not None
                          and c.data_page_offset - c.dictionary_page_offset < _SMALL_DICTIONARY for c in chunks):
            out.append(name)
    return out


class DataFileReader:
    """One Parquet data file opened once (its footer read once) for one or more reads of its columns: a merge
    reads the keys of every file first, then the other columns of only the row groups that hold a surviving row.
    Names here are the file's own (see `file_columns`); names the file lacks (a writer that left them out) are
    absent from what is read."""

    def __init__(self, io: FileIO, path: str):
        if not path.endswith(".parquet"):
            # Paimon writes a file in the format its name ends with: a table whose file.format was changed keeps
            # its older files in the old format.
            raise UnsupportedTableError(f"{path} is written in the {path.rsplit('.', 1)[-1]!r} format: only "
                                        "Parquet files are read here")
        self.path = path
        self._file = io.fs.open_input_file(io.fs_path(path))
        # One open, no dataset layer (pq.read_table builds a dataset per call); pre-buffered as read_table is,
        # which coalesces the column chunks' reads into few requests on an object store.
        self._parquet = pq.ParquetFile(self._file, pre_buffer=True)

    def __enter__(self) -> "DataFileReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    @property
    def group_rows(self) -> list[int]:
        """The number of rows of each row group, in file order."""
        meta = self._parquet.metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]

    @property
    def names(self) -> list[str]:
        """The file's column names."""
        return list(self._parquet.schema_arrow.names)

    def stored(self, names: list[str], groups: list[int] | None = None, rows: pa.Array | None = None, *,
               decoded: bool = True, plain: Sequence[str] = ()) -> pa.Table:
        """The named columns as stored, strings decoded: of the row groups `groups` only, when given; then only
        the rows at the positions `rows` (in what was read), when given.

        A string column that is a small dictionary in every chunk (except those named in `plain`) is read as
        that dictionary and decoded last, only for the rows kept: even for all rows, Arrow's decoding straight
        to plain strings costs more than the indices plus one gather from the dictionary. Without `decoded` such
        columns stay dictionaries (see `decode_dictionaries`)."""
        present, dictionary, parquet = self._columns(names, plain)
        data = parquet.read(columns=present) if groups is None else parquet.read_row_groups(groups, columns=present)
        if rows is not None:
            data = data.take(rows)
        return decode_dictionaries(data) if dictionary and decoded else data

    def _columns(self, names: list[str], plain: Sequence[str] = ()) -> tuple[list[str], list[str], pq.ParquetFile]:
        """Of `names`: those the file has, those of them read as dictionaries, and the reader that does so."""
        stored_names = set(self._parquet.schema_arrow.names)
        present = [n for n in names if n in stored_names]
        dictionary = [n for n in _dictionary_columns(self._parquet, present) if n not in plain]
        parquet = self._parquet if not dictionary else pq.ParquetFile(
            self._file, pre_buffer=True, metadata=self._parquet.metadata, read_dictionary=dictionary)
        return present, dictionary, parquet

    def read(self, columns: FileColumns, target: pa.Schema, groups: list[int] | None = None,
             rows: pa.Array | None = None) -> pa.Table:
        """`columns` (see `stored` for `groups` and `rows`), named and typed as `target`."""
        return evolved(self.stored(columns.to_read, groups, rows), columns, target, self.path)

    def batches(self, columns: FileColumns, target: pa.Schema, batch_rows: int,
                groups: Sequence[int] | None = None) -> Iterator[tuple[int, pa.Table]]:
        """(position in the file of the batch's first row, the batch) for `columns` (as `read` gives them) in
        batches of at most `batch_rows` rows, a row group at a time (of the row groups `groups` only, when given):
        a streaming reader holds one row group's pages and one decoded batch, never the whole file (one of
        Paimon's own files has row groups of up to 128 MB, `parquet.block.size`, and a file can hold many)."""
        present, dictionary, parquet = self._columns(columns.to_read)
        sizes = self.group_rows
        starts = [0, *accumulate(sizes)]
        for group in range(len(sizes)) if groups is None else groups:
            first = starts[group]
            if not present:   # only columns added after the file was written: NULLs, as many as its rows
                for at in range(0, sizes[group], batch_rows):
                    n = min(batch_rows, sizes[group] - at)
                    yield first + at, evolved(pa.table({}), columns, target, self.path, n)
                continue
            for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[group], columns=present):
                data = pa.Table.from_batches([batch])
                yield first, evolved(decode_dictionaries(data) if dictionary else data, columns, target, self.path)
                first += batch.num_rows


def decode_dictionaries(data: pa.Table) -> pa.Table:
    """`data` with its dictionary columns decoded to their values."""
    if not any(pa.types.is_dictionary(t) for t in data.schema.types):
        return data
    return pa.Table.from_arrays(
        [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in data.columns],
        names=data.column_names)


def read_data_file(io: FileIO, path: str, columns: FileColumns, target: pa.Schema,
                   rows: pa.Array | None = None) -> pa.Table:
    """One data file's columns (only the rows at the sorted positions `rows`, when given), named and typed as
    `target` (which holds `columns.names`)."""
    with DataFileReader(io, path) as reader:
        return reader.read(columns, target, rows=rows)


def evolved(data: pa.Table, columns: FileColumns, target: pa.Schema, path: str, num_rows: int | None = None
            ) -> pa.Table:
    """Columns of one data file as stored (`data`, named as in the file), named and typed as `target`;
    `num_rows`: the rows when `data` has no column to count them."""
    arrays = []
    rows = data.num_rows if num_rows is None else num_rows
    for name, source in zip(columns.names, columns.sources):
        t = target.field(name).type
        if source is None or source not in data.column_names:
            arrays.append(pa.nulls(rows, t))
        else:
            arrays.append(cast_evolved(data.column(source), t, name, path))
    return pa.Table.from_arrays(arrays, schema=pa.schema([target.field(n) for n in columns.names]))
