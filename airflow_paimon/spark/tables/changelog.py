"""The changelog a Spark write task owes its bucket under the table's `changelog-producer`, written by the
format library's own producers so that the files are those the library writes (`changelog-<uuid>-<n>.parquet`,
listed by the snapshot's changelog manifest list in the same commit).

* ``input``: the rows the task writes, with their kinds and sequence numbers, in the APPEND snapshot.
* ``lookup``: the exact changes against the base snapshot, in the COMPACT snapshot that also moves the task's
  level-0 file out of level 0 (see format/changelog/lookup.py). A MERGE already read the matched target rows, so
  it hands them over as before-images (columns `BEFORE_COLUMNS`): then the bucket is not read again. Without
  them (a plain upsert reads no target data), or where the before-images cannot be the library's before
  (level-0 files in the bucket that no changelog described yet), the library's lookup reads only the files
  whose key range can hold the task's keys.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from airflow_paimon.format import CommitMessage, Snapshot, Table
from airflow_paimon.format.changelog.input import input_changelog
from airflow_paimon.format.changelog.lookup import Lookup, level_up, lookup_changelog
from airflow_paimon.format.changelog.rows import changes, write_changelog
from airflow_paimon.format.commit import required_changelog
from airflow_paimon.format.data_file import kv_dictionary_columns
from airflow_paimon.format.manifest import FILE_SOURCE_COMPACT
from airflow_paimon.format.read import version_schema
from airflow_paimon.format.schema import SEQUENCE_NUMBER, VALUE_KIND

from ..schema_map import cast_to

__all__ = ["HAS_BEFORE", "BEFORE_SEQUENCE", "before_column", "before_columns", "images_usable", "BucketChangelog"]

HAS_BEFORE = "__has_before"            # the row replaces a target row (its before-image follows)
BEFORE_SEQUENCE = "__before_seq"       # that target row's _SEQUENCE_NUMBER


def before_column(name: str) -> str:
    return f"__before_{name}"


def before_columns(table: Table) -> list[str]:
    """The columns of a before-image, in the order write tasks expect them."""
    return [HAS_BEFORE, BEFORE_SEQUENCE] + [before_column(n) for n in table.schema().field_names]


def images_usable(table: Table) -> bool:
    """Whether a merged target row is the lookup producer's before-image: a `lookup` table whose newest version
    of a key is always the one just written. With `sequence.field` (or `ignore-delete`) a retraction hidden by
    the merged read may still win over the written row, so those tables are looked up by the library."""
    options = table.core_options
    return options.changelog_producer == "lookup" and not options.sequence_fields and not options.ignore_delete


class BucketChangelog:
    """Adds the table's changelog to each bucket's commit message; built on the driver, shipped to tasks."""

    def __init__(self, table: Table, base: Snapshot | None, kind: str = "APPEND"):
        self.table = table
        self.producer = required_changelog(table.core_options, kind)
        self.lookup = Lookup(table, base) if self.producer == "lookup" else None

    def dictionary(self, rows: pa.Table, kinds: pa.Array) -> list[str] | None:
        """The dictionary decision for a bucket's data file and the changelog `add` writes beside it (None when
        the table writes no changelog here: the data file decides alone)."""
        if self.producer not in ("input", "lookup"):
            return None
        return kv_dictionary_columns(self.table.schema(), rows, kinds)

    def add(self, msg: CommitMessage, partition: tuple, bucket: int, rows: pa.Table, kinds: pa.Array,
            sequence: np.ndarray, images: pa.Table | None = None, dictionary: Sequence[str] | None = None) -> None:
        """`rows` (the table's columns, one per key, sorted by key), their `kinds` and `sequence` numbers were
        written as `msg`'s new file; `images`: their before-images (`before_columns`), if the writer has them;
        `dictionary`: the decision the data file was written with (`dictionary`)."""
        if self.producer not in ("input", "lookup") or not msg.new_files:
            return
        table = self.table
        schema = version_schema(table)
        written = rows.append_column(SEQUENCE_NUMBER, pa.array(sequence, pa.int64())).append_column(
            VALUE_KIND, kinds.cast(pa.int8())).select(schema.names).cast(schema)
        if self.producer == "input":
            msg.changelog_files = input_changelog(table, partition, bucket, written, dictionary)
            return
        lookup = self.lookup
        assert lookup is not None
        files = lookup.bucket_files(partition, bucket)
        if images is not None and not any(f.level == 0 for f in files):
            before = _before_rows(table, images, schema)
            msg.compact_changelog = write_changelog(table, partition, bucket, changes(table, before, written),
                                                    FILE_SOURCE_COMPACT, dictionary)
        else:
            msg.compact_changelog = lookup_changelog(table, lookup, partition, bucket, written, dictionary)
        if not table.core_options.writes_settle_vectors:   # else the deletion-vector writer moves the rows up
            msg.compact_before, msg.compact_after = level_up(table, lookup, partition, bucket, msg.new_files[0])


def _before_rows(table: Table, images: pa.Table, schema: pa.Schema) -> pa.Table:
    """The target rows the written rows replace, as the lookup producer's before values (+I rows with the
    sequence number of the version they show)."""
    has = np.asarray(images.column(HAS_BEFORE).to_numpy(), dtype=np.bool_)   # never null: the join sets it
    images = images.filter(pa.array(has, pa.bool_()))
    names: Sequence[str] = table.schema().field_names
    values = cast_to(images.rename_columns([c if c in (HAS_BEFORE, BEFORE_SEQUENCE) else c[len("__before_"):]
                                            for c in images.column_names]),
                     pa.schema([schema.field(n) for n in names]), names)
    return values.append_column(SEQUENCE_NUMBER, images.column(BEFORE_SEQUENCE).cast(pa.int64())).append_column(
        VALUE_KIND, pa.array(np.zeros(images.num_rows, dtype=np.int8))).select(schema.names).cast(schema)
