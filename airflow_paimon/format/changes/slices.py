"""Key slices of a diff: a bucket whose changed files hold more rows than a diff should hold at once is compared one
range of its first key column at a time.

All versions of a key share the value of its first key column, so ranges of that value split the bucket's keys
without splitting any key's versions: each slice's comparison is exactly the bucket's, restricted to the keys
inside the range. The cut values come from the Parquet row groups' statistics of the files only one end lists
(their footers: no row is read to plan), so that each slice covers about `SLICE_ROWS` of their rows; a slice reads
only the row groups whose range overlaps it, a batch at a time, and keeps only its own rows. A slice cannot be
finer than a row group: one row group larger than `SLICE_ROWS` is held whole; and slices are made coarser where row
groups spanning many of them would be read more than `READ_OVER` times over in all. On a deletion-vector table,
whose diff reads every file of a changed bucket at both ends (as a batch read, without the rows the vectors
delete), the slices cut all of those files, and each applies the vectors by row position. A file without such
statistics, or a first key column of a type whose statistics may be inexact here (floating point, nanosecond or
zoned timestamps, nested types), leaves the bucket unsliced, compared whole as before.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..deletion_vectors import keep_mask, read_deletion_files
from ..evolution import DataFileReader, file_columns
from ..manifest import DataFileMeta
from ..scan import Split
from ..schema import KEY_FIELD_PREFIX
from .rows import BATCH_ROWS

if TYPE_CHECKING:
    from ..table import Table

__all__ = ["READ_OVER", "SLICE_ROWS", "KeySlice", "plan_slices", "read_slice"]

SLICE_ROWS = 1 << 18
"""The rows of a bucket's changed files above which its diff is sliced, and about the rows of each slice: two row
groups of the files written here. A slice holds its rows of both ends, their merged states and its change rows;
the feed's threads work on a few at once. Measured on a diff across the full compaction of a 4M-row bucket: 574
MiB and 7.9 s compared whole; 151 MiB and 2.6 s in slices of 2^20 rows; 32-38 MiB and 1.1-1.4 s in slices of
2^16 to 2^18 (smaller sorts and merges, which the threads share)."""


READ_OVER = 2
"""How many times over the slices of a bucket may read its changed rows, at most (see `plan_slices`)."""


@dataclass(frozen=True)
class KeySlice:
    """The keys whose first column lies in [low, high) (None: unbounded on that side), and per changed file
    (bucket, file name) the row groups that may hold such keys."""

    low: Any
    high: Any
    groups: dict[tuple[int, str], list[int]]


@dataclass(frozen=True)
class _Group:
    low: Any
    high: Any
    rows: int
    file: tuple[int, str]
    index: int


def _sliceable(t: pa.DataType) -> bool:
    """Key types whose Parquet statistics are exact bounds once read into Python values here."""
    if pa.types.is_timestamp(t):
        return t.unit != "ns" and t.tz is None
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_date(t)
            or pa.types.is_decimal(t))


def _row_groups(table: "Table", partition: tuple, bucket: int, meta: DataFileMeta, key: str,
                key_type: pa.DataType) -> list[_Group] | None:
    """The row groups of one file with the range of its first key column, typed as today's schema (None: a
    row group keeps no statistics of it)."""
    source = file_columns(table.schema(), table.schema_by_id(meta.schema_id), [key]).sources[0]
    if source is None:
        return None
    with DataFileReader(table.io, table.data_file_path(partition, bucket, meta)) as reader:
        bounds = reader.group_bounds(KEY_FIELD_PREFIX + source)
    if bounds is None:
        return None
    out = []
    for index, (rows, low, high, stored) in enumerate(bounds):
        if low is None or high is None or not _sliceable(stored):
            return None
        try:
            low = pa.scalar(low, stored).cast(key_type).as_py()
            high = pa.scalar(high, stored).cast(key_type).as_py()
        except (pa.ArrowException, TypeError, ValueError, OverflowError):   # statistics of an unexpected shape
            return None
        out.append(_Group(low, high, rows, (bucket, meta.file_name), index))
    return out


def plan_slices(table: "Table", partition: tuple, files: Sequence[tuple[int, DataFileMeta]],
                limit: int) -> list[KeySlice] | None:
    """Slices of about `limit` rows of `files` ((bucket, file) of one partition: a diff's changed files), or None
    when they hold fewer rows or cannot be sliced (see the module's docstring)."""
    trimmed = table.schema().trimmed_primary_keys
    if sum(meta.row_count for _, meta in files) <= limit or not trimmed:
        return None
    key = trimmed[0]
    key_type = table.arrow_schema().field(key).type
    if not _sliceable(key_type):
        return None
    groups: list[_Group] = []
    for bucket, meta in files:
        found = _row_groups(table, partition, bucket, meta, key, key_type)
        if found is None:
            return None
        groups.extend(found)
    groups.sort(key=lambda g: g.low)
    total = sum(g.rows for g in groups)
    while True:
        cuts = _cuts(groups, limit)
        if not cuts:
            return None
        spans = [(bisect.bisect_right(cuts, g.low), bisect.bisect_right(cuts, g.high)) for g in groups]
        # A row group spanning several slices is read by each (a small level-0 file of keys spread over the
        # whole bucket spans them all): coarser slices where that would read the rows more than twice over.
        if sum(g.rows * (last - first + 1) for g, (first, last) in zip(groups, spans)) <= READ_OVER * total:
            break
        limit *= 2
    overlapping: list[dict[tuple[int, str], list[int]]] = [{} for _ in range(len(cuts) + 1)]
    for g, (first, last) in zip(groups, spans):
        # the slices [low, high) overlapping [g.low, g.high]: from the one holding g.low to the one holding g.high
        for held in overlapping[first:last + 1]:
            held.setdefault(g.file, []).append(g.index)
    return [KeySlice(low, high, held) for low, high, held in zip([None, *cuts], [*cuts, None], overlapping)]


def _cuts(groups: list[_Group], limit: int) -> list[Any]:
    """Cut values for slices of about `limit` rows of `groups` (sorted by their lowest key)."""
    cuts: list[Any] = []
    rows = 0
    for g in groups:
        # a cut at a row group's lowest key leaves the rows of every group before it (lower or equal lowest
        # keys) to the slice before; equal lowest keys are never cut apart
        if rows >= limit and g.low > (groups[0].low if not cuts else cuts[-1]):
            cuts.append(g.low)
            rows = 0
        rows += g.rows
    return cuts


def read_slice(table: "Table", split: Split, columns: list[str], schema: pa.Schema,
               key_slice: KeySlice) -> list[pa.Table]:
    """`read_files` of the slice: each file of `split` (of those the slice was planned on), its rows inside the
    slice (`columns` typed by `schema`, which holds the first key column), without the rows the split's deletion
    vectors delete. Only the row groups that may hold them are read, a batch at a time."""
    key = table.schema().trimmed_primary_keys[0]
    key_type = schema.field(key).type
    low = None if key_slice.low is None else pa.scalar(key_slice.low, key_type)
    high = None if key_slice.high is None else pa.scalar(key_slice.high, key_type)
    read = columns if key in columns else [*columns, key]
    vectors = read_deletion_files(table.io, split.deletion_files) if split.deletion_files else {}
    current = table.schema()
    out = []
    for meta in split.files:
        groups = key_slice.groups.get((split.bucket, meta.file_name), [])
        where = file_columns(current, table.schema_by_id(meta.schema_id), read)
        deleted = vectors.get(meta.file_name)
        kept = []
        if groups:
            with DataFileReader(table.io, table.data_file_path(split.partition, split.bucket, meta)) as reader:
                for first, batch in reader.batches(where, schema, BATCH_ROWS, groups):
                    n = batch.num_rows
                    # the vector's positions inside this batch, counted from its first row
                    keep = None if deleted is None else \
                        keep_mask(n, deleted[(deleted >= first) & (deleted < first + n)] - first)
                    mask = _kept(batch.column(key), low, high, keep)
                    kept.append((batch if mask is None else batch.filter(mask)).select(columns))
        out.append(pa.concat_tables(kept) if kept else schema.empty_table().select(columns))
    return out


def _kept(column: pa.ChunkedArray, low: pa.Scalar | None, high: pa.Scalar | None,
          keep: np.ndarray | None) -> Any:
    """The mask of the rows with low <= value < high that `keep` keeps (None: every row is kept)."""
    masks: list[Any] = []
    if low is not None:
        masks.append(pc.greater_equal(column, low))
    if high is not None:
        masks.append(pc.less(column, high))
    if keep is not None:
        masks.append(pa.array(keep))
    if not masks:
        return None
    mask = masks[0]
    for more in masks[1:]:
        mask = pc.and_(mask, more)
    return mask
