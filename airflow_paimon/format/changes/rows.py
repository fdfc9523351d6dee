"""Rows of one data or changelog file, in the table's current columns, with their row kinds; and the change
columns (Delta's `_change_type`, `_commit_version`, `_commit_timestamp`) added on whole arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_tables import conformed
from ..data_file import INSERT
from ..evolution import DataFileReader, file_columns
from ..manifest import DataFileMeta
from ..read import fill_partition, version_schema, with_default_values
from ..scan import Split
from ..schema import VALUE_KIND

if TYPE_CHECKING:
    import pyarrow.dataset as ds

    from ..table import Table

CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
# index = the row kind's byte in `_VALUE_KIND` (0 +I, 1 -U, 2 +U, 3 -D)
CHANGE_TYPES = pa.array(["insert", "update_preimage", "update_postimage", "delete"])
CHANGE_FIELDS: list[pa.Field] = [pa.field(CHANGE_TYPE, pa.string(), False), pa.field(COMMIT_VERSION, pa.int64(), False),
                 pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms", tz="UTC"), False)]


def needed_columns(table: "Table", columns: Sequence[str], filter: "ds.Expression | None",
                   keys: bool = False) -> list[str]:
    """The table columns to read: the wanted ones, those the filter names, and (for comparisons) the keys."""
    names = table.arrow_schema().names
    out = list(columns)
    extra = [n for n in names if filter is not None and n in str(filter)]
    if keys:
        extra += table.schema().trimmed_primary_keys + table.partition_keys
    out += [n for n in names if n in extra and n not in out]
    return out


BATCH_ROWS = 65_536
"""The most rows of one file a change feed reads at once (pyarrow's own default batch): what a reader holds is one
such batch and the row group it comes from, however many rows the file, the commit or the range has."""


def batches_with_kinds(table: "Table", partition: bytes, bucket: int, meta: DataFileMeta, names: list[str],
                       positions: np.ndarray | None = None) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """The rows of one file (`names` columns, read by field id through the file's schema) with their kinds, in
    batches of at most `BATCH_ROWS` rows, in the file's order. With `positions` (ascending), only the rows at
    those positions, read from the row groups that hold them."""
    split = Split(table.partition_codec.from_bytes(partition), partition, bucket, [meta])
    if table.is_primary_key:
        schema, read = version_schema(table), names + [VALUE_KIND]
    else:
        schema, read = table.arrow_schema(), names
    where = file_columns(table.schema(), table.schema_by_id(meta.schema_id), read)
    with DataFileReader(table.io, table.data_file_path(split.partition, bucket, meta)) as reader:
        groups = None
        if positions is not None:
            ends = np.cumsum(reader.group_rows)
            groups = np.unique(np.searchsorted(ends, positions, side="right")).tolist()
        for first, data in reader.batches(where, schema, BATCH_ROWS, groups):
            if positions is not None:
                lo, hi = np.searchsorted(positions, [first, first + data.num_rows])
                if hi == lo:
                    continue
                data = data.take(pa.array(positions[lo:hi] - first))
            if table.is_primary_key:
                kinds = data.column(VALUE_KIND).to_numpy().astype(np.int8)
                data = data.drop_columns([VALUE_KIND])
            else:
                kinds = np.full(data.num_rows, INSERT, dtype=np.int8)
            yield fill_partition(table, split, data), kinds


def change_schema(table: "Table", columns: Sequence[str]) -> pa.Schema:
    logical = table.arrow_schema()
    return pa.schema([logical.field(c).with_nullable(True) for c in columns] + CHANGE_FIELDS)


def change_batch(source: "Table", data: pa.Table, kinds: np.ndarray, version: int, millis: int,
                 schema: pa.Schema, filter: "ds.Expression | None") -> pa.Table:
    """`data` (rows of `source`) as change rows of one commit, filtered, in `schema`'s columns; NULLs of columns
    with a default value read as it, as in a read of the table."""
    n = data.num_rows
    table = with_default_values(source, data)
    table = table.append_column(CHANGE_TYPE, pc.take(CHANGE_TYPES, pa.array(kinds, pa.int8())))
    table = table.append_column(COMMIT_VERSION, pa.array(np.full(n, version, dtype=np.int64)))
    table = table.append_column(COMMIT_TIMESTAMP, pa.array(np.full(n, millis, dtype=np.int64)).cast(
        pa.timestamp("ms", tz="UTC")))
    if filter is not None and n:
        table = table.filter(filter)
    return conformed(table.select(schema.names), schema)
