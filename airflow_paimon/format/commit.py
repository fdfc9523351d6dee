"""Atomic, exactly-once commits: data files first, then manifests, then the snapshot file created only if absent.

A lost race re-plans on the new latest snapshot after checking that the concurrent commits did not touch what this
commit depends on. Every snapshot carries `commitUser` and `commitIdentifier`; committing the same pair again finds
the earlier snapshot and writes nothing, which is what makes a retried Airflow task safe.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, Sequence

from .errors import CommitConflictError, SnapshotNotFoundError
from .manifest import ADD, DELETE, DataFileMeta, ManifestEntry, ManifestFileMeta, ManifestIO, merge_entries
from .snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot, SnapshotManager

if TYPE_CHECKING:
    from .table import Table

MANIFEST_MERGE_MIN_COUNT = 30
MANIFEST_TARGET_ENTRIES = 20_000
MAX_RETRIES = 20


def backoff(attempt: int) -> float:
    """Seconds to wait before retry `attempt`: exponential, capped at 1 s, with full jitter, so that writers who
    lost the same race do not meet again in lockstep."""
    return random.uniform(0, min(0.01 * (2 ** attempt), 1.0))


@dataclass
class CommitMessage:
    """The files one writer added to (and removed from) one bucket; JSON-serialisable via to_dict."""

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    deleted_files: list[DataFileMeta] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition.hex(),
            "bucket": self.bucket,
            "total_buckets": self.total_buckets,
            "new_files": [f.to_dict() for f in self.new_files],
            "deleted_files": [f.to_dict() for f in self.deleted_files],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CommitMessage":
        return cls(bytes.fromhex(d["partition"]), d["bucket"], d["total_buckets"],
                   [DataFileMeta.from_dict(f) for f in d["new_files"]],
                   [DataFileMeta.from_dict(f) for f in d["deleted_files"]])

    def entries(self) -> list[ManifestEntry]:
        out = [ManifestEntry(DELETE, self.partition, self.bucket, self.total_buckets, f) for f in self.deleted_files]
        out += [ManifestEntry(ADD, self.partition, self.bucket, self.total_buckets, f) for f in self.new_files]
        return out


@dataclass(frozen=True)
class CommitId:
    """Who commits (`commitUser`) and which of their commits this is (`commitIdentifier`): a snapshot carrying the
    pair proves the commit landed, so a retried task that commits under the same id writes nothing twice."""

    user: str
    identifier: int

    def __post_init__(self) -> None:
        if not self.user:
            raise ValueError("a commit id needs a non-empty commit user")
        object.__setattr__(self, "identifier", int(self.identifier))

    @classmethod
    def of(cls, user: str | None, identifier: int | None) -> "CommitId | None":
        """The id of a commit given as (user, identifier) arguments; None (not exactly-once) unless both are."""
        return cls(user, int(identifier)) if user is not None and identifier is not None else None


def find_commit(table: Table, commit_id: CommitId) -> Snapshot | None:
    """The snapshot holding this commit, if it landed and is still known: the one exactly-once lookup.

    Retained snapshots are searched first, newest first; then tags, which copy the snapshot they name (with its
    commit user and identifier), so a commit stays recognisable after its snapshot expired for as long as a tag
    of it lives.
    """
    snapshots: SnapshotManager = table.snapshot_manager
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    if latest is not None and earliest is not None:
        for n in range(latest, earliest - 1, -1):
            try:
                snap = snapshots.snapshot(n)
            except SnapshotNotFoundError:
                continue
            if snap.commit_user == commit_id.user and snap.commit_identifier == commit_id.identifier:
                return snap
    for tag in table.tags.list():
        snap = tag.snapshot
        if snap.commit_user == commit_id.user and snap.commit_identifier == commit_id.identifier:
            return snap
    return None


class Latest(Enum):
    """The `base` of a transaction that starts from the table's latest snapshot, read when first needed."""
    SNAPSHOT = "latest"


LATEST: Final = Latest.SNAPSHOT


class Transaction:
    """A commit in progress: its id, the snapshot its changes are computed against, and the commit itself.

    Every writer goes through one: look at `already_committed` (the exactly-once check), compute the changes
    against `base`, then `commit(messages)`. The commit writes manifests, then creates the snapshot file only if
    absent; a lost race checks that the concurrent commits did not touch what this one depends on and retries
    on the new latest snapshot; a commit that cannot land deletes the data files it added.
    """

    def __init__(self, table: Table, *, commit_id: CommitId | None = None, kind: str = "APPEND",
                 properties: dict[str, str] | None = None, base: Snapshot | Latest | None = LATEST,
                 commit_user: str | None = None):
        """`base`: a snapshot, None (the empty table) or LATEST (read when first needed). `commit_user` names the
        writer of a commit without an id (default: the table's per-process user); such a commit is not
        exactly-once."""
        self.table = table
        self.commit_id = commit_id
        self.kind = kind
        self.properties = properties
        self._base = base
        self.snapshots: SnapshotManager = table.snapshot_manager
        self.manifests: ManifestIO = table.manifest_io
        if commit_id is not None:
            self.user, self.identifier = commit_id.user, commit_id.identifier
        else:
            self.user, self.identifier = commit_user or table.default_commit_user, BATCH_COMMIT_IDENTIFIER

    @cached_property
    def already_committed(self) -> Snapshot | None:
        """The snapshot (or tag) holding this commit when an earlier attempt landed it; None otherwise."""
        return find_commit(self.table, self.commit_id) if self.commit_id is not None else None

    @cached_property
    def base(self) -> Snapshot | None:
        """The snapshot the changes are computed against; concurrent changes after it are checked at commit."""
        return self.table.latest_snapshot() if self._base is LATEST else self._base

    def commit(self, messages: Sequence[CommitMessage]) -> Snapshot | None:
        """Commit `messages` as one snapshot; returns it, the earlier snapshot holding the same commit, or None
        when there is nothing to commit."""
        commit_id = self.commit_id
        if commit_id is not None:
            # Looked up again, not the cached answer: the changes may have taken long, and a retried attempt of
            # the same task may have landed meanwhile.
            existing = find_commit(self.table, commit_id)
            if existing is not None:
                return existing
        entries = [e for m in messages for e in m.entries()]
        if not entries and self.kind != "OVERWRITE":
            return None
        base_id = self.base.id if self.base is not None else 0
        try:
            return self._commit_entries(entries, base_id)
        except CommitConflictError as e:
            # Nothing landed unless this very commit did (a retried task racing itself): then it is the answer.
            landed = find_commit(self.table, commit_id) if commit_id is not None else None
            if landed is not None:
                return landed
            deleted = self.delete_new_files(messages)
            raise CommitConflictError(f"{e}; the {deleted} data file(s) it wrote were deleted") from None

    def delete_new_files(self, messages: Sequence[CommitMessage]) -> int:
        """Delete the data files a commit that did not land added, so a lost race leaves no orphans behind.

        Only files this commit created go: not one it also deletes (a file moved between levels keeps its name),
        and not one the latest snapshot references (belt and braces: new files have fresh UUID names).
        """
        kept = {f.file_name for m in messages for f in m.deleted_files}
        candidates = [(m, f) for m in messages for f in m.new_files if f.file_name not in kept]
        if not candidates:
            return 0
        live = {e.file.file_name for e in self.table.file_entries(self.snapshots.latest())}
        codec = self.table.partition_codec
        count = 0
        for m, f in candidates:
            if f.file_name in live:
                continue
            partition = codec.from_bytes(m.partition)
            folder = self.table.bucket_dir(partition, m.bucket)
            for path in [self.table.data_file_path(partition, m.bucket, f)] + [f"{folder}/{x}" for x in f.extra_files]:
                self.table.io.delete(path)
            count += 1
        return count

    def _commit_entries(self, entries: list[ManifestEntry], base_snapshot_id: int) -> Snapshot:
        written: list[str] = []
        for attempt in range(MAX_RETRIES):
            latest = self.snapshots.latest()
            if latest is not None and latest.id != base_snapshot_id:
                self._check_conflicts(base_snapshot_id, latest, entries)
            base_metas = self._base_manifests(latest)
            # A snapshot carries the table's latest schema, as Paimon's commit does, even when this writer
            # opened the table before a schema change (its files record the schema they were written with).
            schema_id = max(self.table.schema().id, self.table.schema_manager.latest_id() or 0)
            delta_meta = self.manifests.write_entries(entries, schema_id,
                                                      self.table.partition_stats([e.partition for e in entries]))
            written.append(delta_meta.file_name)
            base_metas, new_manifest_files = self._maybe_merge(base_metas)
            written += new_manifest_files
            base_list, base_size = self.manifests.write_list(base_metas)
            delta_list, delta_size = self.manifests.write_list([delta_meta])
            written += [base_list, delta_list]
            added = sum(e.file.row_count for e in entries if e.kind == ADD)
            removed = sum(e.file.row_count for e in entries if e.kind == DELETE)
            total_before = (latest.total_record_count or 0) if latest is not None else 0
            new_id = latest.id + 1 if latest is not None else 1
            snap = Snapshot(
                id=new_id,
                schema_id=schema_id,
                base_manifest_list=base_list,
                base_manifest_list_size=base_size,
                delta_manifest_list=delta_list,
                delta_manifest_list_size=delta_size,
                commit_user=self.user,
                commit_identifier=self.identifier,
                commit_kind=self.kind,
                time_millis=int(time.time() * 1000),
                log_offsets={},
                total_record_count=total_before + added - removed,
                delta_record_count=added - removed,
                changelog_record_count=0,
                watermark=latest.watermark if latest is not None else None,
                properties=self.properties or None,
                next_row_id=latest.next_row_id if latest is not None else None,
            )
            if self.snapshots.create_snapshot(snap):
                self.snapshots.commit_hint(new_id)
                if latest is None:
                    self.snapshots.earliest_hint(new_id)
                return snap
            # Lost the race: the manifests written for this attempt are referenced by nobody.
            for name in written:
                self.manifests.io.delete(self.manifests.path(name))
            written.clear()
            if self.commit_id is not None:
                existing = find_commit(self.table, self.commit_id)
                if existing is not None:
                    return existing
            time.sleep(backoff(attempt))
        raise CommitConflictError(f"gave up after {MAX_RETRIES} attempts: other writers keep committing")

    # ---- helpers ------------------------------------------------------------------------------------
    def _base_manifests(self, latest: Snapshot | None) -> list[ManifestFileMeta]:
        if latest is None:
            return []
        return self.manifests.read_list(latest.base_manifest_list) + \
            self.manifests.read_list(latest.delta_manifest_list)

    def _maybe_merge(self, metas: list[ManifestFileMeta]) -> tuple[list[ManifestFileMeta], list[str]]:
        """Fold many small manifests into few, as Paimon does once `manifest.merge-min-count` is reached."""
        small = [m for m in metas if m.num_added_files + m.num_deleted_files < MANIFEST_TARGET_ENTRIES]
        if len(small) < MANIFEST_MERGE_MIN_COUNT:
            return metas, []
        big = [m for m in metas if m not in small]
        entries: list[ManifestEntry] = []
        for m in big + small:
            entries.extend(self.manifests.read_entries(m.file_name))
        live = merge_entries(entries)
        out: list[ManifestFileMeta] = []
        schema_id = self.table.schema().id
        for i in range(0, len(live), MANIFEST_TARGET_ENTRIES):
            chunk = live[i:i + MANIFEST_TARGET_ENTRIES]
            out.append(self.manifests.write_entries(chunk, schema_id,
                                                    self.table.partition_stats([e.partition for e in chunk])))
        return out, [m.file_name for m in out]

    def _check_conflicts(self, base_id: int, latest: Snapshot, entries: list[ManifestEntry]) -> None:
        """Refuse to commit over concurrent changes that would make this commit wrong."""
        deleted = {e.identifier for e in entries if e.kind == DELETE}
        touched = {(e.partition, e.bucket): e.file.min_sequence_number
                   for e in entries if e.kind == ADD and self.table.is_primary_key}
        if deleted:
            live = {e.identifier for e in self.table.file_entries(latest)}
            missing = deleted - live
            if missing:
                raise CommitConflictError(
                    f"{len(missing)} file(s) this commit replaces were removed by a concurrent commit "
                    f"(snapshots {base_id + 1}..{latest.id}); nothing was committed")
        if touched:
            for sid in range(base_id + 1, latest.id + 1):
                snap = self.snapshots.snapshot(sid)
                for meta in self.manifests.read_list(snap.delta_manifest_list):
                    for e in self.manifests.read_entries(meta.file_name):
                        lowest = touched.get((e.partition, e.bucket))
                        if e.kind == ADD and lowest is not None and e.file.max_sequence_number >= lowest:
                            raise CommitConflictError(
                                f"bucket {e.bucket} was written concurrently by snapshot {sid}; "
                                "nothing was committed, retry the write")

