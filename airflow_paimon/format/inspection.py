"""`table.inspect`: a table's metadata as Arrow tables, one method per Paimon system table.

Reading metadata is kept apart from changing it (`table.maintenance`), as pyiceberg separates `inspect` from
`maintenance`: everything here only reads. The columns are those of Paimon's system tables (`t$snapshots`,
`t$tags`, `t$files`, `t$manifests`, `t$partitions`, `t$schemas`, `t$options`), see system_tables.py.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .change_tables import audit_log_table, binlog_table, consumers_table
from .system_tables import files_table, java_string, manifests_table, system_table

if TYPE_CHECKING:
    from .table import Table

# The first five columns of Paimon's `$partitions` (PartitionsTable); the ones after them (created_at, created_by,
# updated_by, options, total_buckets, done, deleted_record_count) come from a metastore or deletion vectors,
# which this library does not keep.
_PARTITIONS_FIELDS: list[pa.Field] = [
    pa.field("partition", pa.string()),
    pa.field("record_count", pa.int64(), nullable=False),
    pa.field("file_size_in_bytes", pa.int64(), nullable=False),
    pa.field("file_count", pa.int64(), nullable=False),
    pa.field("last_update_time", pa.timestamp("ms")),
]
PARTITIONS_SCHEMA = pa.schema(_PARTITIONS_FIELDS)


class TableInspection:
    """Metadata of one table; `files`, `manifests` and `partitions` describe the latest snapshot, or the snapshot,
    tag or point in time given (as `Table.read` takes them)."""

    def __init__(self, table: "Table"):
        self.table = table

    def snapshots(self) -> pa.Table:
        """Every retained snapshot (`$snapshots`)."""
        return system_table(self.table, "snapshots")

    def tags(self) -> pa.Table:
        """Every tag, with its snapshot, creation time and retention (`$tags`)."""
        return system_table(self.table, "tags")

    def schemas(self) -> pa.Table:
        """Every schema version the table has had (`$schemas`)."""
        return system_table(self.table, "schemas")

    def options(self) -> pa.Table:
        """The table's options as key/value rows (`$options`)."""
        return system_table(self.table, "options")

    def files(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None) -> pa.Table:
        """The live data files of a snapshot, with levels, sequence numbers and statistics (`$files`)."""
        return files_table(self.table, snapshot_id, tag, as_of)

    def manifests(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None) -> pa.Table:
        """The manifest files a snapshot lists (`$manifests`)."""
        return manifests_table(self.table, snapshot_id, tag, as_of)

    def consumers(self) -> pa.Table:
        """Every consumer and the next snapshot it reads (`$consumers`)."""
        return consumers_table(self.table)

    def audit_log(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None, *,
                  start: Any = None, end: Any = None, mode: str = "auto") -> pa.Table:
        """`$audit_log`: `rowkind` (+I, -U, +U, -D) then the columns, for the rows of a snapshot (all +I) or the
        changes of a range (start, end] read as `Table.changes` reads it (deletes kept)."""
        return audit_log_table(self.table, snapshot_id, tag, as_of, start=start, end=end, mode=mode)

    def binlog(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None, *,
               start: Any = None, end: Any = None, mode: str = "auto") -> pa.Table:
        """`$binlog`: as `audit_log`, with each column an array; an update is one +U row `[before, after]`, as
        Paimon's BinlogTable packs it."""
        return binlog_table(self.table, snapshot_id, tag, as_of, start=start, end=end, mode=mode)

    def partitions(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None) -> pa.Table:
        """Per partition: rows, bytes and files held by the live data files, and when the newest was written
        (`$partitions`; its partition is `k=v/k2=v2`, NULL values shown as `partition.default-name`)."""
        table = self.table
        snap = table.resolve_snapshot(snapshot_id, tag, as_of)
        if snap is None:
            return PARTITIONS_SCHEMA.empty_table()
        totals: dict[bytes, list[int]] = {}
        for e in table.file_entries(snap):
            got = totals.setdefault(e.partition, [0, 0, 0, -1])
            got[0] += e.file.row_count
            got[1] += e.file.file_size
            got[2] += 1
            got[3] = max(got[3], e.file.creation_time_ms if e.file.creation_time_ms is not None else -1)
        codec = table.partition_codec
        default = table.core_options.partition_default_name
        names = table.partition_keys

        def render(partition: bytes) -> str:
            values = codec.from_bytes(partition) if names else ()
            return "/".join(f"{k}={default if v is None else java_string(v)}" for k, v in zip(names, values))

        rendered = sorted((render(p), got) for p, got in totals.items())
        rows = [{"partition": name, "record_count": n, "file_size_in_bytes": size, "file_count": count,
                 "last_update_time": _local_time(newest)} for name, (n, size, count, newest) in rendered]
        return pa.Table.from_pylist(rows, schema=PARTITIONS_SCHEMA)


def _local_time(millis: int) -> dt.datetime | None:
    """As Paimon shows times in system tables: the reading machine's local date-time."""
    if millis < 0:
        return None
    return dt.datetime.fromtimestamp(millis / 1000).replace(microsecond=(millis % 1000) * 1000)
