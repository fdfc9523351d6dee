"""Deletes and updates on append tables with deletion vectors: rows are marked deleted, data files stay as they are.

As Paimon's DELETE / UPDATE on such a table (Spark's DeleteFromPaimonTableCommand and UpdatePaimonTableCommand
with BaseAppendDeleteFileMaintainer): the positions of the deleted rows are added to their data files' vectors
(joined with what the file's vector already deleted), and the vectors of the partition (an unaware-bucket table,
bucket 0) or of the bucket (a bucketed append table) are written to one new deletion-vector index file that
replaces the ones they were in. An update appends the new versions of the rows in new data files, in the same
commit. Compaction later rewrites the files without the deleted rows and drops their vectors (compact.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from .commit_message import CommitMessage
from .deletion_vectors import write_vectors
from .deletion_vectors_index import DeletionVectors, IndexEntry, index_directory
from .errors import InvalidDataError, SchemaMismatchError
from .evolution import file_columns, read_data_file
from .key_reads import positions_of_keys

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .table import Table


def require_append_vectors(table: "Table", doing: str = "deleting rows of") -> None:
    """Changing rows of an append table (`doing` it: a delete, an update, a MERGE) needs its deletion vectors:
    without them Paimon rewrites whole data files, which this library does not do."""
    if table.is_primary_key:
        raise InvalidDataError(f"{table.identifier} has a primary key: delete its rows by key (Table.delete)")
    if not table.core_options.deletion_vectors:
        raise InvalidDataError(
            f"{doing} the append table {table.identifier} needs deletion vectors to mark the rows it changes: set "
            "'deletion-vectors.enabled' = 'true' on the table (without them Paimon rewrites the data files, which "
            "this library does not do). Nothing was changed."
        )


def delete_matching(table: "Table", match: pa.Table, base: "Snapshot | None") -> list[CommitMessage]:
    """Messages marking deleted every live row of `base` whose values in `match`'s columns equal one row of
    `match`; no message when no live row matches."""
    require_append_vectors(table)
    schema = table.schema()
    columns = list(match.column_names)
    unknown = [c for c in columns if c not in schema.field_names]
    if not columns or unknown:
        raise SchemaMismatchError(
            f"the rows to delete name no column or columns not in {table.identifier}: "
            f"{unknown or columns} (table columns: {schema.field_names})"
        )
    logical = schema.logical_arrow_schema()
    target = pa.schema([logical.field(c).with_nullable(True) for c in columns])
    try:
        wanted = match.select(columns).cast(target).group_by(columns).aggregate([])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise SchemaMismatchError(
            f"the rows to delete do not have {table.identifier}'s column types: {error}"
        ) from error
    hits: dict[tuple[bytes, int], dict[str, np.ndarray]] = {}
    for e in table.file_entries(base):
        partition = table.partition_codec.from_bytes(e.partition)
        path = table.data_file_path(partition, e.bucket, e.file)
        got = read_data_file(
            table.io, path, file_columns(schema, table.schema_by_id(e.file.schema_id), columns), target
        )
        found = positions_of_keys(got, wanted, columns)
        if len(found):
            hits.setdefault((e.partition, e.bucket), {})[e.file.file_name] = found
    return mark_deleted(table, base, hits)


def mark_deleted(
    table: "Table", base: "Snapshot | None", hits: Mapping[tuple[bytes, int], Mapping[str, np.ndarray]]
) -> list[CommitMessage]:
    """Messages adding `hits` ((partition, bucket) -> data file name -> positions) to the vectors of `base`: one
    new index file per (partition, bucket) whose vectors gain a position, replacing the ones it had."""
    require_append_vectors(table)
    vectors = DeletionVectors.of(table, base)
    messages = []
    for (pbytes, bucket), per_file in sorted(hits.items()):
        current = dict(vectors.bucket(pbytes, bucket))
        changed = False
        for name, positions in per_file.items():
            old = current.get(name)
            union = np.unique(positions) if old is None else np.union1d(old, positions)
            if old is None or len(union) != len(old):
                current[name] = union
                changed = True
        if changed:
            messages.append(_replace_vectors(table, vectors, pbytes, bucket, current))
    return messages


def _replace_vectors(
    table: "Table", vectors: DeletionVectors, pbytes: bytes, bucket: int, current: dict[str, np.ndarray]
) -> CommitMessage:
    name, size, ranges = write_vectors(
        table.io, index_directory(table, pbytes, bucket), current, table.core_options.deletion_vectors_bitmap64
    )
    return CommitMessage(
        pbytes,
        bucket,
        table.total_buckets,
        index_adds=[IndexEntry.deletion_vectors(pbytes, bucket, name, size, ranges)],
        index_deletes=[e.file_name for e in vectors.entries_of(pbytes, bucket)],
    )


def update_matching(
    table: "Table",
    rows: pa.Table,
    on: Sequence[str],
    base: "Snapshot | None",
    write_rows: Callable[[], list[CommitMessage]],
) -> list[CommitMessage]:
    """Messages replacing every live row whose `on` columns equal one of `rows`' by that row: the old rows marked
    deleted, the new rows' data files (`write_rows`, called once the input is checked) appended. A row of `rows` that
    matches nothing is inserted, as in an upsert."""
    require_append_vectors(table, "updating rows of")
    if not on:
        raise InvalidDataError("an update of an append table needs the columns that find the rows it replaces (on)")
    missing = [c for c in on if c not in rows.column_names]
    if missing:
        raise SchemaMismatchError(f"the update rows lack the columns {missing} that find the rows they replace")
    keys = rows.select(list(on))
    if keys.group_by(list(on)).aggregate([]).num_rows != rows.num_rows:
        raise InvalidDataError(
            f"the update rows repeat values of {list(on)}: each old row must have one new "
            "version. Nothing was committed."
        )
    return delete_matching(table, keys, base) + write_rows()
