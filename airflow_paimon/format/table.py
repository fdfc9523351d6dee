"""A Paimon table: its schema, options, snapshots and the read/write entry points users call."""

from __future__ import annotations

import copy
import getpass
import time
import uuid
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa

from .changelog.full_compaction import full_compaction_due
from .changes import changes
from .commit import LATEST, MAX_RETRIES, CommitId, Latest, Transaction, backoff, find_commit
from .commit_message import CommitMessage
from .consumers import ConsumerManager
from .errors import CommitConflictError, PaimonError, TableNotFoundError, UnsupportedTableError
from .fileio import FileIO
from .inspection import TableInspection
from .maintenance import TableMaintenance
from .manifest import DataFileMeta, ManifestEntry, ManifestIO, SimpleStats, merge_entries
from .options import TableOptions
from .partition import PartitionCodec, bucket_folder
from .read import read_splits
from .scan import ScanPlanner, Split
from .schema import SchemaManager, TableSchema
from .schema_change import SchemaChange, commit_schema_changes
from .snapshot import Snapshot, SnapshotManager
from .tag_file import Tag
from .tags import TagManager
from .time_travel import TimeTravel, snapshot_at
from .values import epoch_millis
from .write import TableWrite

if TYPE_CHECKING:
    import pyarrow.dataset as ds


class Table:
    def __init__(self, io: FileIO, path: str, identifier: str):
        self.io = io
        self.path = path.rstrip("/")
        self.identifier = identifier
        self.schema_manager = SchemaManager(io, self.path)
        self.snapshot_manager = SnapshotManager(io, self.path)
        schema = self.schema_manager.latest()
        if schema is None:
            raise TableNotFoundError(f"table {identifier!r} does not exist at {self.path}")
        self._schemas: dict[int, TableSchema] = {}
        self._entries: tuple[tuple[str, str], list[ManifestEntry]] | None = None
        self._use_schema(schema)
        self.default_commit_user = f"{getpass.getuser()}-{uuid.uuid4()}"

    def _use_schema(self, schema: TableSchema) -> None:
        schema.validate()
        core_options = TableOptions.parse(schema.options, bool(schema.primary_keys))
        core_options.check_fields(schema.field_names)
        self._schema = schema
        self._schemas[schema.id] = schema
        self.core_options = core_options
        self.manifest_io = ManifestIO(self.io, self.path, schema.options.get("manifest.compression", "zstd"))
        self.__dict__.pop("partition_codec", None)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("partition_codec", None)
        state["_entries"] = None   # a task that needs entries reads them: a table's can be large to ship
        return state

    def _refuse(self, action: str, reason: str | None) -> None:
        schema = self._schema
        reasons = ([reason] if reason else []) + schema.unsupported_columns()
        cross_partition = schema.cross_partition_refusal()
        if cross_partition:
            reasons.append(cross_partition)
        if reasons:
            raise UnsupportedTableError(f"cannot {action} {self.identifier}: {'; '.join(reasons)}")

    def require_readable(self) -> None:
        """Refuse to read rows that would not be the rows Paimon reads; metadata stays usable."""
        self._refuse("read", self.core_options.read_refusal)

    def require_writable(self) -> None:
        """Refuse to write files Paimon would not write (or read back) the same way."""
        self._refuse("write to", self.core_options.write_refusal)

    # ---- metadata --------------------------------------------------------------------------------
    def schema(self) -> TableSchema:
        return self._schema

    def schema_by_id(self, schema_id: int) -> TableSchema:
        """The schema a data file was written with (its `schema_id`); schema files never change, so they are
        read once."""
        got = self._schemas.get(schema_id)
        if got is None:
            got = self._schemas[schema_id] = self.schema_manager.schema(schema_id)
        return got

    def at_schema(self, schema_id: int) -> "Table":
        """This table seen through another of its schemas (same files, same snapshots)."""
        if schema_id == self._schema.id:
            return self
        view = copy.copy(self)
        view._use_schema(self.schema_by_id(schema_id))
        return view

    def alter(self, *changes: SchemaChange) -> TableSchema:
        """Apply schema changes (``SchemaChange.add_column(...)``, ``rename_column``, ``drop_column``,
        ``update_column_type``) as one new schema, as Paimon's ``ALTER TABLE`` does; returns it.

        Nothing is rewritten: data files keep the schema they were written with and are read through field ids.
        A bad change raises before anything is written; a concurrent schema change is retried on top of it.
        """
        new = commit_schema_changes(self.schema_manager, changes, self.identifier)
        self._use_schema(new)
        return new

    def arrow_schema(self) -> pa.Schema:
        return self._schema.logical_arrow_schema()

    def options(self) -> dict[str, str]:
        return dict(self._schema.options)

    @property
    def is_primary_key(self) -> bool:
        return bool(self._schema.primary_keys)

    @property
    def primary_keys(self) -> list[str]:
        return list(self._schema.primary_keys)

    @property
    def partition_keys(self) -> list[str]:
        return list(self._schema.partition_keys)

    @property
    def bucket_keys(self) -> list[str]:
        return list(self.core_options.bucket_key) if self.core_options.bucket_key else self._schema.trimmed_primary_keys

    @property
    def has_append_vectors(self) -> bool:
        """An append table with deletion vectors: its deletes and updates live only in the vectors."""
        return not self.is_primary_key and self.core_options.deletion_vectors

    @property
    def is_dynamic_bucket(self) -> bool:
        """A primary-key table whose keys' buckets the HASH index keeps (bucket = -1, see dynamic_bucket.py)."""
        return self.is_primary_key and self.core_options.bucket == -1

    @property
    def total_buckets(self) -> int:
        """Buckets of the table as manifest entries record them: the fixed number, or -1 (dynamic, unaware)."""
        return self.core_options.bucket if self.is_primary_key or self.core_options.bucket >= 1 else -1

    @cached_property
    def partition_codec(self) -> PartitionCodec:
        names = self._schema.partition_keys
        return PartitionCodec(names, [self._schema.arrow_type(n) for n in names],
                              self.core_options.partition_default_name,
                              [str(self._schema.field(n).type) for n in names], self.core_options.partition_legacy_name)

    def partition_stats(self, partitions: Iterable[bytes]) -> SimpleStats:
        from .binary_row import EMPTY_ROW, serialize_row
        names = self._schema.partition_keys
        if not names:
            return SimpleStats(EMPTY_ROW, EMPTY_ROW, ())
        decoded = [self.partition_codec.from_bytes(p) for p in set(partitions)]
        mins, maxs, nulls = [], [], []
        for i in range(len(names)):
            values = [d[i] for d in decoded if d[i] is not None]
            mins.append(min(values) if values else None)
            maxs.append(max(values) if values else None)
            nulls.append(sum(1 for d in decoded if d[i] is None))
        types = self.partition_codec.types
        return SimpleStats(serialize_row(mins, types), serialize_row(maxs, types), tuple(nulls))

    def bucket_dir(self, partition: Sequence[Any], bucket: int) -> str:
        return f"{self.data_root}/{self.partition_codec.path(partition)}{bucket_folder(bucket)}"

    @property
    def data_root(self) -> str:
        """The folder holding the partition and bucket folders: the table's, or its data-file.path-directory."""
        directory = self.core_options.data_file_directory
        return f"{self.path}/{directory}" if directory else self.path

    def data_file_path(self, partition: Sequence[Any], bucket: int, meta: DataFileMeta) -> str:
        if meta.external_path:
            return meta.external_path
        return f"{self.bucket_dir(partition, bucket)}/{meta.file_name}"

    # ---- snapshots -------------------------------------------------------------------------------
    def snapshots(self) -> list[Snapshot]:
        return list(self.snapshot_manager.snapshots())

    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.latest()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.snapshot_manager.snapshot(snapshot_id)

    def snapshot_at_or_before(self, when: Any) -> Snapshot | None:
        return self.snapshot_manager.latest_at_or_before(epoch_millis(when, "when"))

    def find_commit(self, commit_id: CommitId) -> Snapshot | None:
        """The snapshot (retained, or copied into a tag) holding this commit, if it landed; see commit.find_commit."""
        return find_commit(self, commit_id)

    def file_entries(self, snapshot: Snapshot | None) -> list[ManifestEntry]:
        """The live ADD entries of a snapshot (or of a tag, whose file is a snapshot).

        The entries of the last snapshot asked for are kept: a write reads them for its sequence numbers, then for
        its lookups or deletion vectors. They are keyed by the snapshot's manifest lists, whose names are unique
        and whose files never change (a snapshot id can come back after a rollback; its lists cannot)."""
        if snapshot is None:
            return []
        key = (snapshot.base_manifest_list, snapshot.delta_manifest_list)
        kept = self._entries
        if kept is not None and kept[0] == key:
            return list(kept[1])
        metas = self.manifest_io.read_list(snapshot.base_manifest_list) + \
            self.manifest_io.read_list(snapshot.delta_manifest_list)
        entries: list[ManifestEntry] = []
        for m in metas:
            entries.extend(self.manifest_io.read_entries(m.file_name))
        live = merge_entries(entries)
        self._entries = (key, live)
        return list(live)

    def changelog_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The changelog files a snapshot produced (see ManifestIO.changelog_entries); each has a data file's
        columns and lives at `data_file_path(partition, bucket, entry.file)`."""
        return self.manifest_io.changelog_entries(snapshot)

    def next_sequence_numbers(self, snapshot: Snapshot | None = None) -> dict[tuple, int]:
        """(partition tuple, bucket) -> the first sequence number a new file there must use."""
        snap = snapshot if snapshot is not None else self.latest_snapshot()
        out: dict[tuple, int] = {}
        codec = self.partition_codec
        decoded: dict[bytes, tuple] = {}
        for e in self.file_entries(snap):
            p = decoded.get(e.partition)
            if p is None:
                p = decoded[e.partition] = codec.from_bytes(e.partition)
            key = (p, e.bucket)
            nxt = e.file.max_sequence_number + 1
            if nxt > out.get(key, 0):
                out[key] = nxt
        return out

    # ---- resolving what to read ------------------------------------------------------------------
    def resolve_snapshot(self, snapshot_id: int | None = None, tag: str | None = None,
                         as_of: Any = None, closest_tag: bool = False) -> Snapshot | None:
        """The snapshot to read: by id, by tag, current at a time (see `time_travel`), or the latest."""
        given = sum(x is not None for x in (snapshot_id, tag, as_of))
        if given > 1:
            raise PaimonError("give at most one of snapshot_id, tag and as_of")
        if snapshot_id is not None:
            return self.snapshot_manager.snapshot(int(snapshot_id))
        if tag is not None:
            return self.tags.get(tag).snapshot
        if as_of is not None:
            return self.time_travel(as_of, closest_tag).snapshot
        return self.latest_snapshot()

    def time_travel(self, as_of: Any, closest_tag: bool = False) -> TimeTravel:
        """The snapshot current at `as_of`, and how it was found.

        Exact, or SnapshotExpiredError naming the closest tag when the snapshots of that time expired and no tag
        provably holds the state current then. With `closest_tag=True` that tag is used instead, and the result
        says so (`how == "closest-tag"`).
        """
        return snapshot_at(self, epoch_millis(as_of, "as_of"), closest_tag,
                           "read that tag, or ask for the closest tag (closest_tag=True, --closest-tag)")

    @cached_property
    def tags(self) -> TagManager:
        return TagManager(self)

    # ---- reading ---------------------------------------------------------------------------------
    def plan(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None,
             filter: ds.Expression | None = None, closest_tag: bool = False) -> list[Split]:
        snap = self.resolve_snapshot(snapshot_id, tag, as_of, closest_tag)
        if snap is None:
            return []
        return ScanPlanner(self).plan(self.file_entries(snap), filter, snap.id, snap)

    def read(self, snapshot_id: int | None = None, tag: str | None = None, as_of: Any = None,
             columns: Sequence[str] | None = None, filter: ds.Expression | None = None,
             closest_tag: bool = False) -> pa.Table:
        """Rows of the latest snapshot (or of the snapshot, tag or time given), merged, filtered, projected.

        A read by time says in the schema metadata which snapshot it used and how it was found
        (`paimon.snapshot-id`, `paimon.time-travel`: exact or closest-tag, and `paimon.tag`).
        """
        travel = None
        if as_of is not None:
            if snapshot_id is not None or tag is not None:
                raise PaimonError("give at most one of snapshot_id, tag and as_of")
            travel = self.time_travel(as_of, closest_tag)
            snap: Snapshot | None = travel.snapshot
        else:
            snap = self.resolve_snapshot(snapshot_id, tag)
        splits = [] if snap is None else ScanPlanner(self).plan(self.file_entries(snap), filter, snap.id, snap)
        try:
            data = read_splits(self, splits, columns, filter)
        except FileNotFoundError:
            raise self._missing_data_file(splits, snap) from None
        if travel is None:
            return data
        meta = {b"paimon.snapshot-id": str(travel.snapshot.id).encode(), b"paimon.time-travel": travel.how.encode()}
        if travel.tag is not None:
            meta[b"paimon.tag"] = travel.tag.encode()
        return data.replace_schema_metadata({**(data.schema.metadata or {}), **meta})

    def _missing_data_file(self, splits: list[Split], snap: Snapshot | None) -> PaimonError:
        """Which file of the read is gone, named with the snapshot that needs it (only on the error path)."""
        for split in splits:
            for meta in split.files:
                path = self.data_file_path(split.partition, split.bucket, meta)
                if not self.io.exists(path):
                    return PaimonError(
                        f"data file {path} of snapshot {snap.id if snap else '?'} of {self.identifier} is missing "
                        "(deleted outside this library?); restore it from a backup, or read or roll back to a "
                        "snapshot or tag that does not use it")
        return PaimonError(f"a data file of {self.identifier} disappeared while it was read; retry the read")

    def read_split(self, split: Split, columns: Sequence[str] | None = None,
                   filter: ds.Expression | None = None) -> pa.Table:
        from .read import read_split
        return read_split(self, split, columns, filter)

    def changes(self, start: Any = None, end: Any = None, *, columns: Sequence[str] | None = None,
                filter: ds.Expression | None = None, mode: str = "auto", consumer_id: str | None = None,
                options: Mapping[str, str] | None = None) -> pa.RecordBatchReader:
        """The rows that changed in (start, end], streamed, with Delta's `_change_type`, `_commit_version` and
        `_commit_timestamp` columns (see format/changes/).

        `start`/`end` are snapshot ids, tag names or times; Paimon's bounds: start exclusive, end inclusive
        (default end: the latest snapshot). `mode` is Paimon's `incremental-between-scan-mode`: auto, changelog,
        delta or diff. With `consumer_id` the range starts at that consumer's position; the consumer is not
        moved (call `consumers.advance` once the rows are safely used). Without bounds, the table's (or
        `options`') `incremental-between`, `incremental-between-timestamp` or `incremental-to-auto-tag` give them.
        """
        return changes(self, start, end, columns=columns, filter=filter, mode=mode, consumer_id=consumer_id,
                       options=options)

    @property
    def consumers(self) -> ConsumerManager:
        """Named readers' positions (`consumer/consumer-<id>`): create, advance, reset, delete, list."""
        return ConsumerManager(self)

    # ---- writing ---------------------------------------------------------------------------------
    def new_write(self) -> TableWrite:
        return TableWrite(self)

    def transaction(self, *, commit_id: CommitId | None = None, kind: str = "APPEND",
                    properties: dict[str, str] | None = None, base: Snapshot | Latest | None = LATEST,
                    commit_user: str | None = None, changelog: str = "none") -> Transaction:
        """A commit in progress (see commit.Transaction): check `already_committed`, compute the changes against
        `base`, then `commit(messages)`. `changelog` names the changelog producer the writer implements."""
        return Transaction(self, commit_id=commit_id, kind=kind, properties=properties, base=base,
                           commit_user=commit_user, changelog=changelog)

    def commit(self, messages: Sequence[CommitMessage], *, commit_user: str | None = None,
               commit_identifier: int | None = None, commit_kind: str = "APPEND",
               base_snapshot_id: int | None = None, properties: dict[str, str] | None = None) -> Snapshot | None:
        """Commit messages written elsewhere (by distributed writers) as one snapshot; `base_snapshot_id` is the
        snapshot they were computed against (default: the latest, read now)."""
        if base_snapshot_id is None:
            base: Snapshot | Latest | None = LATEST
        else:
            base = self.snapshot(int(base_snapshot_id)) if int(base_snapshot_id) > 0 else None
        return self.transaction(commit_id=CommitId.of(commit_user, commit_identifier), kind=commit_kind,
                                properties=properties, base=base, commit_user=commit_user).commit(messages)

    def _write_and_commit(self, produce: Callable[[Snapshot | None], list[CommitMessage]], commit_user: str | None,
                          commit_identifier: int | None) -> Snapshot | None:
        """Write on the latest snapshot and commit; when a concurrent commit wins the race and conflicts (same
        bucket, overlapping sequence numbers), the attempt's files are deleted (by the commit) and the data is
        written again on the new latest snapshot, so a lost race neither fails the write nor leaves files.

        The write produces the changelog of `input` and `lookup` tables itself; on a `full-compaction` table
        with `full-compaction.delta-commits`, a full compaction follows the write once that many delta commits
        have landed since the last compaction. Under `write-only` a write compacts nothing (a dedicated job does)."""
        commit_id = CommitId.of(commit_user, commit_identifier)
        attempt = 0
        while True:
            tx = self.transaction(commit_id=commit_id, commit_user=commit_user,
                                  changelog=self.core_options.changelog_producer)
            if tx.already_committed is not None:
                return tx.already_committed
            messages = produce(tx.base)
            if not messages:
                return None
            try:
                landed = tx.commit(messages)
            except CommitConflictError:
                attempt += 1
                if attempt >= MAX_RETRIES:
                    raise
                time.sleep(backoff(attempt))
                continue
            if not self.core_options.write_only and full_compaction_due(self):
                return self.maintenance.compact(commit_user=commit_user) or landed
            return landed

    def write(self, data: pa.Table | pa.RecordBatch, commit_user: str | None = None,
              commit_identifier: int | None = None, kinds: pa.Array | None = None) -> Snapshot | None:
        """One atomic commit: upsert for primary-key tables, append for append tables."""
        rows = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        return self._write_and_commit(lambda base: self.new_write().write(rows, kinds, base),
                                      commit_user, commit_identifier)

    def delete(self, keys: pa.Table, commit_user: str | None = None,
               commit_identifier: int | None = None) -> Snapshot | None:
        """One commit that deletes these primary keys; on an append table with deletion vectors, every row equal to
        one of `keys` in its columns (marked deleted in deletion vectors, data files untouched)."""
        return self._write_and_commit(lambda base: self.new_write().delete_rows(keys, base),
                                      commit_user, commit_identifier)

    def update(self, rows: pa.Table, on: Sequence[str], commit_user: str | None = None,
               commit_identifier: int | None = None) -> Snapshot | None:
        """One commit replacing the rows of an append table with deletion vectors whose `on` columns equal one of
        `rows`' by that row (rows matching nothing are inserted)."""
        return self._write_and_commit(lambda base: self.new_write().update_rows(rows, list(on), base),
                                      commit_user, commit_identifier)

    # ---- tags, metadata and upkeep ---------------------------------------------------------------
    def create_tag(self, name: str, snapshot_id: int | None = None, as_of: Any = None,
                   time_retained: Any = None, replace: bool = False) -> Tag:
        return self.tags.create(name, snapshot_id, as_of, time_retained, replace)

    def rename_tag(self, old: str, new: str) -> Tag:
        return self.tags.rename(old, new)

    @property
    def inspect(self) -> TableInspection:
        """The table's metadata as Arrow tables (Paimon's system tables): `table.inspect.snapshots()`, ..."""
        return TableInspection(self)

    @property
    def maintenance(self) -> TableMaintenance:
        """Expiry, tag deletion, rollback, orphan cleanup and compaction: `table.maintenance.expire_snapshots()`."""
        return TableMaintenance(self)

    def __repr__(self) -> str:
        return f"Table({self.identifier!r}, path={self.path!r})"
