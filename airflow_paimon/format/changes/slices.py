"""Key slices of a diff: a bucket whose changed files hold more rows than a diff should hold at once is compared one
range of its first key column at a time.

All versions of a key share the value of its first key column, so ranges of that value split the bucket's keys
without splitting any key's versions: each slice's comparison is exactly the bucket's, restricted to the keys
inside the range. A data file holds its rows sorted by key, so the files are read side by side as sorted streams, a
batch at a time, each row once: a file's later rows all lie at or above the first key value of the last row it
gave, so every row below the lowest of those values, over the files still open, has been read. Those rows make the
next slice once about `SLICE_ROWS` rows are held (or, when rows of one first key value outnumber that, as soon as
the range moves on). Neither statistics nor the row groups' sizes matter: a row group of any size (Paimon's own
writers cut them at 128 MB) is read in batches, never held whole.

On a deletion-vector table, whose diff reads every file of a changed bucket at both ends (as a batch read, without
the rows the vectors delete), the slices cut all of those files, read once for both ends, and each row carries its
position in its file so that each end applies its own vector. A first key column of a type whose order here may
differ from Paimon's (floating point: Paimon orders -0.0 before 0.0 and NaN last; nested types) leaves the bucket
unsliced, compared whole. A file whose rows turn out not to be sorted by key is a `CorruptFileError`: slicing it
would silently drop rows.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_tables import conformed
from ..errors import CorruptFileError
from ..evolution import DataFileReader, file_columns
from ..manifest import DataFileMeta
from ..scan import Split
from .rows import BATCH_ROWS

if TYPE_CHECKING:
    from ..table import Table

__all__ = ["POSITION", "SLICE_ROWS", "KeySlice", "key_slices", "read_slice"]

SLICE_ROWS = 1 << 16
"""The rows of a bucket's changed files above which its diff is sliced, and about the rows of each slice. A slice
holds its rows of both ends, their merged states and its change rows; the feed's threads work on a few at once,
and a few more wait their turn with their rows read. Measured on a diff across the full compaction of a 4M-row
bucket (peak of pyarrow's allocation, time): 514 MiB and 6.3 s compared whole; 73 MiB and 0.93 s in slices of
2^18 rows, 41 MiB and 0.82 s in slices of 2^17, 21 MiB and 0.86 s in slices of 2^16, 11 MiB and 0.90 s in slices
of 2^15; with each file one row group, 25 MiB and 0.76 s in slices of 2^16."""

POSITION = "_FILE_POSITION"
"""The column of a slice's rows that holds each row's position in its file (only when asked for)."""


@dataclass(frozen=True)
class KeySlice:
    """Per file ((bucket, file name)) its rows of one range of first key values, in file order."""

    rows: dict[tuple[int, str], pa.Table]

    def of(self, bucket: int, meta: DataFileMeta) -> pa.Table | None:
        return self.rows.get((bucket, meta.file_name))


def _sliceable(t: pa.DataType) -> bool:
    """Key types that Arrow orders as Paimon does."""
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_date(t)
            or pa.types.is_decimal(t) or pa.types.is_timestamp(t) or pa.types.is_time(t))


def _ascending(keys: pa.ChunkedArray) -> bool:
    """Whether the values never decrease."""
    if len(keys) < 2:
        return True
    whole = keys.combine_chunks()
    return not pc.any(pc.less(whole[1:], whole[:-1])).as_py()


class _FileRows:
    """One file's rows in key order, read a batch at a time; those not yet handed to a slice are held."""

    def __init__(self, table: "Table", partition: tuple, bucket: int, meta: DataFileMeta, columns: list[str],
                 schema: pa.Schema, key: str, positions: bool, batch_rows: int, files: ExitStack):
        self.name = (bucket, meta.file_name)
        self.path = table.data_file_path(partition, bucket, meta)
        reader = files.enter_context(DataFileReader(table.io, self.path))
        read = columns if key in columns else [*columns, key]
        where = file_columns(table.schema(), table.schema_by_id(meta.schema_id), read)
        self.batches = reader.batches(where, schema, batch_rows)
        self.columns, self.key, self.positions = columns, key, positions
        self.held: list[pa.Table] = []
        self.rows = 0
        self.last: Any = None   # the first key value (an Arrow scalar) of the last row read
        self.done = meta.row_count == 0

    def read(self, handed: pa.Scalar | None) -> None:
        """The next batch, held; `handed`: the bound below which rows went to slices already (none may follow)."""
        for first, batch in self.batches:
            if batch.num_rows == 0:
                continue
            keys = batch.column(self.key)
            if not _ascending(keys) or (self.last is not None and pc.less(keys[0], self.last).as_py()) \
                    or (handed is not None and pc.less(keys[0], handed).as_py()):
                raise CorruptFileError(f"{self.path} does not hold its rows sorted by primary key, as every data "
                                       "file of a primary-key table must")
            self.last = keys[batch.num_rows - 1]
            data = batch.select(self.columns)
            if self.positions:
                data = data.append_column(POSITION, pa.array(np.arange(first, first + batch.num_rows,
                                                                       dtype=np.int64)))
            self.held.append(data)
            self.rows += batch.num_rows
            return
        self.done = True

    def below(self, bound: pa.Scalar | None) -> pa.Table | None:
        """The held rows whose first key lies below `bound` (all of them when None), handed over."""
        if not self.held:
            return None
        data = pa.concat_tables(self.held) if len(self.held) > 1 else self.held[0]
        n = data.num_rows if bound is None else \
            int(np.count_nonzero(pc.less(data.column(self.key), bound).to_numpy(zero_copy_only=False)))
        rest = data.slice(n)
        self.held = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        return data.slice(0, n) if n else None


def key_slices(table: "Table", partition: tuple, files: Sequence[tuple[int, DataFileMeta]], columns: list[str],
               schema: pa.Schema, limit: int, *, positions: bool = False) -> Iterator[KeySlice] | None:
    """Slices of about `limit` rows of `files` ((bucket, file) of one partition: a diff's changed files), each file's
    `columns` typed by `schema` (which holds the first key column), with their positions (`POSITION`) when
    asked; None when they hold fewer rows or cannot be sliced (see the module's docstring). The files are read as
    the slices are."""
    trimmed = table.schema().trimmed_primary_keys
    if sum(meta.row_count for _, meta in files) <= limit or not trimmed:
        return None
    key = trimmed[0]
    if not _sliceable(schema.field(key).type):
        return None
    return _slices(table, partition, files, columns, schema, key, limit, positions)


def _slices(table: "Table", partition: tuple, files: Sequence[tuple[int, DataFileMeta]], columns: list[str],
            schema: pa.Schema, key: str, limit: int, positions: bool) -> Iterator[KeySlice]:
    # each file's batches about its share of a slice: every open file holds a batch at least
    batch_rows = max(1, min(BATCH_ROWS, limit // len(files)))
    with ExitStack() as opened:
        streams = [_FileRows(table, partition, bucket, meta, columns, schema, key, positions, batch_rows, opened)
                   for bucket, meta in files]
        handed: pa.Scalar | None = None
        stuck = False
        while True:
            open_ = [s for s in streams if not s.done]
            unread = [s for s in open_ if s.last is None]
            if unread or (open_ and (stuck or sum(s.rows for s in streams) < limit)):
                # a file not read yet, else the one holding the range back
                (unread or [_lowest(open_)])[0].read(handed)
                stuck = False
                continue
            bound = _lowest(open_).last if open_ else None
            parts = {s.name: part for s in streams if (part := s.below(bound)) is not None}
            if parts:
                yield KeySlice(parts)
                handed = bound
            if not open_:
                return
            # nothing lies below the lowest file's last key: read on, past the limit (one key value's many rows)
            stuck = not parts


def _lowest(streams: list[_FileRows]) -> _FileRows:
    """The stream whose last read first key value is the least."""
    lowest = streams[0]
    for s in streams[1:]:
        if pc.less(s.last, lowest.last).as_py():
            lowest = s
    return lowest


def read_slice(table: "Table", split: Split, columns: list[str], schema: pa.Schema, key_slice: KeySlice,
               vectors: Mapping[str, np.ndarray]) -> list[pa.Table]:
    """`read_files` of the slice: each file of `split` (of those the slice was cut from), its rows in the slice
    (`columns` typed by `schema`), without the rows that `vectors` (the split's deletion vectors by file name, read
    once for all of its slices) delete, by the rows' positions, which the slice holds for a split with vectors."""
    target = pa.schema([schema.field(c) for c in columns])
    out = []
    for meta in split.files:
        rows = key_slice.of(split.bucket, meta)
        if rows is None:
            out.append(target.empty_table())
            continue
        deleted = vectors.get(meta.file_name)
        if deleted is not None and len(deleted):
            rows = rows.filter(pa.array(~np.isin(rows.column(POSITION).to_numpy(), deleted)))
        out.append(conformed(rows.select(columns), target))
    return out
