"""MERGE into an append table with deletion vectors, as Paimon's MERGE INTO such a table does it: a target row
that a clause updates or deletes is marked deleted in its data file's vector, an update's new row and an insert
are appended, all in one commit; no data file is rewritten.

An append table has no key: one source row may match many target rows, and a source row is "not matched" only
when no row of any partition or bucket matches it. So the target's live rows are joined with the source at once,
each carrying where it is (its file and its position there, which is what a deletion vector marks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_paimon.format import Snapshot, Split, Table
from airflow_paimon.format.deletion_vectors_append import mark_deleted
from airflow_paimon.format.read import fill_partition, read_files

from .clauses import ROW_KINDS

if TYPE_CHECKING:
    from airflow_paimon.format.commit_message import CommitMessage

__all__ = ["LOCATORS", "duplicate_on_message", "read_with_locators", "append_commit_messages"]

FILE, POSITION = "__file", "__position"
LOCATORS = [FILE, POSITION]
"""Columns a target row carries through the MERGE: the index of its data file in the read, its position there."""


def duplicate_on_message(key: str, extra: int) -> str:
    return (f"the MERGE source has several rows with the same `on` values ({key}; {extra} extra row(s) in the "
            "source). Can't execute this MERGE: a target row would match more than one source row. Nothing was "
            "committed.")


def read_with_locators(table: Table, splits: Iterable[Split],
                       columns: list[str]) -> tuple[pa.Table, list[tuple[bytes, int, str]]]:
    """The live rows of `splits` (`columns`, then LOCATORS), and the (partition, bucket, data file) each
    ``__file`` index names."""
    logical = table.arrow_schema()
    schema = pa.schema([logical.field(c) for c in columns])
    out_schema = pa.schema(list(schema) + [pa.field(FILE, pa.int32()), pa.field(POSITION, pa.int64())])
    files: list[tuple[bytes, int, str]] = []
    parts = []
    for split in splits:
        for meta, data in zip(split.files, read_files(table, split, columns, schema, positions=POSITION)):
            data = fill_partition(table, split, data)
            index = pa.array(np.full(data.num_rows, len(files), dtype=np.int32))
            parts.append(data.add_column(len(columns), FILE, index).select(out_schema.names).cast(out_schema))
            files.append((split.partition_bytes, split.bucket, meta.file_name))
    return (pa.concat_tables(parts) if parts else out_schema.empty_table()), files


def append_commit_messages(table: Table, base: Snapshot | None, out: pa.Table,
                           files: list[tuple[bytes, int, str]]) -> tuple[list["CommitMessage"], dict[str, int]]:
    """The commit of a MERGE's evaluated rows (`out`: the table's columns, ``__kind``, LOCATORS): the updated and
    deleted target rows marked in their vectors, the updated and inserted rows appended; and the row counts."""
    kinds = out.column("__kind").to_numpy(zero_copy_only=False)
    removed = np.isin(kinds, [ROW_KINDS["update"], ROW_KINDS["delete"]])
    written = np.isin(kinds, [ROW_KINDS["update"], ROW_KINDS["insert"]])
    hits: dict[tuple[bytes, int], dict[str, np.ndarray]] = {}
    if removed.any():
        where = out.filter(pa.array(removed)).select(LOCATORS)
        order = pc.sort_indices(where, sort_keys=[(FILE, "ascending"), (POSITION, "ascending")])
        file_of = where.column(FILE).take(order).to_numpy()
        positions = where.column(POSITION).take(order).to_numpy()
        starts = np.flatnonzero(np.r_[True, file_of[1:] != file_of[:-1]])
        for begin, end in zip(starts, np.r_[starts[1:], len(file_of)]):
            pbytes, bucket, name = files[int(file_of[begin])]
            hits.setdefault((pbytes, bucket), {})[name] = positions[begin:end]
    messages = mark_deleted(table, base, hits)
    rows = out.filter(pa.array(written)).select(table.arrow_schema().names)
    if rows.num_rows:
        messages += table.new_write().write(rows, None, base_snapshot=base)
    counts = {name: int((kinds == ROW_KINDS[kind]).sum())
              for name, kind in (("inserted", "insert"), ("updated", "update"), ("deleted", "delete"))}
    return messages, counts
