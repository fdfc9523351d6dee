"""Atomic, exactly-once commits: data files first, then manifests, then the snapshot file created only if absent.

A lost race re-plans on the new latest snapshot after checking that the concurrent commits did not touch what this
commit depends on. Every snapshot carries `commitUser` and `commitIdentifier`; committing the same pair again finds
the earlier snapshot and writes nothing, which is what makes a retried Airflow task safe.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Final, Sequence

from .commit_message import CommitMessage
from .deletion_vectors import INDEX_TYPE as DV_INDEX
from .deletion_vectors_index import IndexEntry, combine_index, index_file_path, read_index_manifest
from .errors import CommitConflictError, SnapshotNotFoundError, UnsupportedTableError
from .hash_index import HASH_INDEX
from .manifest import ADD, DELETE, DataFileMeta, ManifestEntry, ManifestFileMeta, ManifestIO, merge_entries
from .snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot, SnapshotManager

if TYPE_CHECKING:
    from .options import TableOptions
    from .table import Table

MANIFEST_MERGE_MIN_COUNT = 30
MANIFEST_TARGET_ENTRIES = 20_000
MAX_RETRIES = 20


def backoff(attempt: int) -> float:
    """Seconds to wait before retry `attempt`: exponential, capped at 1 s, with full jitter, so that writers who
    lost the same race do not meet again in lockstep."""
    return random.uniform(0, min(0.01 * (2 ** attempt), 1.0))


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


def required_changelog(options: "TableOptions", kind: str) -> str:
    """Which changelog a commit of `kind` owes a table with these options ('none': none).

    Writes owe it under `input`, and under `lookup` unless the table is `write-only` (its writes leave their rows
    at level 0 for the compaction to describe); compactions under `lookup` (for the level-0 rows they merge) and
    `full-compaction`. OVERWRITE commits carry none, as in Paimon.
    """
    producer = options.changelog_producer
    if kind == "APPEND" and (producer == "input" or producer == "lookup" and not options.write_only):
        return producer
    if kind == "COMPACT" and producer in ("lookup", "full-compaction"):
        return producer
    return "none"


class Transaction:
    """A commit in progress: its id, the snapshot its changes are computed against, and the commit itself.

    Every writer goes through one: look at `already_committed` (the exactly-once check), compute the changes
    against `base`, then `commit(messages)`. The commit writes manifests, then creates the snapshot file only if
    absent; a lost race checks that the concurrent commits did not touch what this one depends on and retries
    on the new latest snapshot; a commit that cannot land deletes the data files it added.
    """

    def __init__(self, table: Table, *, commit_id: CommitId | None = None, kind: str = "APPEND",
                 properties: dict[str, str] | None = None, base: Snapshot | Latest | None = LATEST,
                 commit_user: str | None = None,
                 changelog: str = "none"):
        """`base`: a snapshot, None (the empty table) or LATEST (read when first needed). `commit_user` names the
        writer of a commit without an id (default: the table's per-process user); such a commit is not
        exactly-once. `changelog`: the `changelog-producer` whose changelog the writer puts in its messages;
        a writer that does not produce the changelog the table asks for is refused here, before it writes."""
        producer = table.core_options.changelog_producer
        owed = required_changelog(table.core_options, kind)
        if owed != "none" and changelog != owed:
            raise UnsupportedTableError(
                f"cannot commit to {table.identifier}: its changelog-producer is {producer!r}, and this writer "
                f"({kind} commit) does not produce that changelog; write with the format library's Table.write/"
                "delete/compact, or set changelog-producer = 'none' if the table needs no changelog")
        self.changelog = changelog
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
        """Commit `messages` as one snapshot (two when they carry a compact increment: the writer's, then a COMPACT
        one, as Paimon commits them); returns the last, the earlier snapshot holding the same commit, or None
        when there is nothing to commit."""
        commit_id = self.commit_id
        exactly_once = commit_id is not None
        if commit_id is not None:
            # Looked up again, not the cached answer: the changes may have taken long, and a retried attempt of
            # the same task may have landed meanwhile.
            existing = find_commit(self.table, commit_id)
            if existing is not None:
                return existing
        entries = [e for m in messages for e in m.entries()]
        changelog = [e for m in messages for e in m.changelog_entries()]
        compact = [e for m in messages for e in m.compact_entries()]
        index = ([e for m in messages for e in m.index_adds], [n for m in messages for n in m.index_deletes])
        compact_index = ([e for m in messages for e in m.compact_index_adds],
                         [n for m in messages for n in m.compact_index_deletes])
        if not entries and not changelog and not compact and not any(index + compact_index) \
                and self.kind != "OVERWRITE":
            return None
        base_id = self.base.id if self.base is not None else 0
        first: Snapshot | None = None
        first_manifests: list[ManifestFileMeta] | None = None
        if entries or changelog or any(index) or self.kind == "OVERWRITE":
            then = bool(compact or any(compact_index))   # a COMPACT snapshot follows: its commit writes the hint
            try:
                first, first_manifests = self._commit_entries(entries, changelog, base_id, self.kind,
                                                              recheck=exactly_once, index=index, hint=not then)
            except CommitConflictError as e:
                # Nothing landed unless this very commit did (a retried task racing itself): then it is the answer.
                landed = find_commit(self.table, commit_id) if commit_id is not None else None
                if landed is not None:
                    return landed
                deleted = self.delete_new_files(messages)
                raise CommitConflictError(f"{e}; the {deleted} data file(s) it wrote were deleted") from None
            if not then:
                return first
        compact_changelog = [e for m in messages for e in m.compact_changelog_entries()]
        # Checked against the writer's base, not its own snapshot: the increment was planned on that base. When
        # the writer's snapshot came right after the base, it is the only change since (it added level-0 files
        # and moved nothing), so only what others committed after it needs checking.
        planned_on = first.id if first is not None and first.id == base_id + 1 else base_id
        # Right after the writer's own snapshot, this commit starts from it and from the manifests it was just
        # written with, not from files read back; a concurrent commit in between makes the create-if-absent of
        # the next id fail, and the retry reads the table as usual.
        after = (first, first_manifests) if first is not None and first_manifests is not None else None
        try:
            return self._commit_entries(compact, compact_changelog, planned_on, "COMPACT", recheck=False,
                                        compact_increment=True, index=compact_index, after=after)[0]
        except CommitConflictError as e:
            if first is None:
                deleted = self.delete_new_files(messages)
                raise CommitConflictError(f"{e}; the {deleted} data file(s) it wrote were deleted") from None
            # The writer's snapshot landed; its level-0 files stay where they are and the next lookup
            # compaction produces their changelog, as after a Paimon writer whose compaction did not land.
            # (A conflict means others committed after it: the LATEST hint is theirs.)
            self.delete_new_files(messages, compact_only=True)
            return first

    def delete_new_files(self, messages: Sequence[CommitMessage], compact_only: bool = False) -> int:
        """Delete the files a commit that did not land added, so a lost race leaves no orphans behind.

        Only files this commit created go: not one it also deletes (a file moved between levels keeps its name),
        and not one the latest snapshot references (belt and braces: new files have fresh UUID names). With
        `compact_only`, only the compact increment's files (its writer's snapshot landed).
        """
        candidates: list[tuple[CommitMessage, DataFileMeta]] = []
        for m in messages:
            moved = {f.file_name for f in m.deleted_files}
            if not compact_only:
                candidates += [(m, f) for f in m.new_files if f.file_name not in moved]
                candidates += [(m, f) for f in m.changelog_files]
            elsewhere = moved | {f.file_name for f in m.new_files + m.compact_before}
            candidates += [(m, f) for f in m.compact_after if f.file_name not in elsewhere]
            candidates += [(m, f) for f in m.compact_changelog]
        for m in messages:
            for e in (m.index_adds if not compact_only else []) + m.compact_index_adds:
                self.table.io.delete(index_file_path(self.table, e))
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

    def _commit_entries(self, entries: list[ManifestEntry], changelog: list[ManifestEntry], base_snapshot_id: int,
                        kind: str, *, recheck: bool, compact_increment: bool = False,
                        index: tuple[list[IndexEntry], list[str]] = ([], []), hint: bool = True,
                        after: tuple[Snapshot, list[ManifestFileMeta]] | None = None,
                        ) -> tuple[Snapshot, list[ManifestFileMeta] | None]:
        """One snapshot of `kind`, and the manifests listing its files (None when an earlier attempt of this
        commit is the answer); `recheck`: a lost race first looks for this commit id (a retried task racing
        itself); a `compact_increment` moves files between levels and needs its target levels still free.
        `after`: the snapshot this commit most likely follows and its manifests, taken as the latest on the first
        attempt instead of reading them back. `hint`: write the LATEST hint (a commit followed at once by another
        leaves it to that one)."""
        written: list[str] = []
        latest: Snapshot | None
        known: list[ManifestFileMeta] | None
        for attempt in range(MAX_RETRIES):
            if attempt == 0 and after is not None:
                latest, known = after
            else:
                latest, known = self.snapshots.latest(), None
            if latest is not None and latest.id != base_snapshot_id:
                if compact_increment:
                    self._check_levels_free(base_snapshot_id, latest, entries)
                else:
                    self._check_conflicts(base_snapshot_id, latest, entries)
                    self._check_hash_index_conflicts(base_snapshot_id, latest, index[0])
                    self._check_append_vector_conflicts(base_snapshot_id, latest, entries, index[0])
            base_metas = list(known) if known is not None else self._base_manifests(latest)
            previous_index = latest.index_manifest if latest is not None else None
            index_manifest = combine_index(self.table, previous_index, *index)
            if index_manifest != previous_index and index_manifest is not None:
                written.append(index_manifest)
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
            changelog_list: str | None = None
            changelog_size: int | None = None
            if changelog:
                changelog_meta = self.manifests.write_entries(
                    changelog, schema_id, self.table.partition_stats([e.partition for e in changelog]))
                changelog_list, changelog_size = self.manifests.write_list([changelog_meta])
                written += [changelog_meta.file_name, changelog_list]
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
                commit_kind=kind,
                time_millis=int(time.time() * 1000),
                log_offsets={},
                total_record_count=total_before + added - removed,
                delta_record_count=added - removed,
                changelog_manifest_list=changelog_list,
                changelog_manifest_list_size=changelog_size,
                index_manifest=index_manifest,
                changelog_record_count=sum(e.file.row_count for e in changelog),
                watermark=latest.watermark if latest is not None else None,
                properties=self.properties or None,
                next_row_id=latest.next_row_id if latest is not None else None,
            )
            if self.snapshots.create_snapshot(snap):
                if hint:
                    self.snapshots.commit_hint(new_id)
                if latest is None:
                    self.snapshots.earliest_hint(new_id)
                return snap, base_metas + [delta_meta]
            # Lost the race: the manifests written for this attempt are referenced by nobody.
            for name in written:
                self.manifests.io.delete(self.manifests.path(name))
            written.clear()
            if recheck and self.commit_id is not None:
                existing = find_commit(self.table, self.commit_id)
                if existing is not None:
                    return existing, None
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

    def _check_levels_free(self, base_id: int, latest: Snapshot, entries: list[ManifestEntry]) -> None:
        """A compact increment lands only if the files it replaces are still live and no concurrent commit put
        files at the levels it moves files to (each level above 0 is one sorted run)."""
        live = self.table.file_entries(latest)
        ids = {e.identifier for e in live}
        replaced = {e.identifier for e in entries if e.kind == DELETE}
        if replaced - ids:
            raise CommitConflictError(f"files this compaction replaces were compacted concurrently "
                                      f"(snapshots {base_id + 1}..{latest.id})")
        taken = {(e.partition, e.bucket, e.file.level) for e in live
                 if e.file.level > 0 and e.identifier not in replaced}
        for e in entries:
            if e.kind == ADD and e.file.level > 0 and (e.partition, e.bucket, e.file.level) in taken:
                raise CommitConflictError(f"level {e.file.level} of bucket {e.bucket} was filled concurrently "
                                          f"(snapshots {base_id + 1}..{latest.id})")

    def _check_hash_index_conflicts(self, base_id: int, latest: Snapshot, adds: Sequence[IndexEntry]) -> None:
        """Refuse to commit HASH index files (dynamic buckets) over a concurrent change of the HASH index of the
        same partitions: the other writer may have put new keys in buckets this one filled too, or a key this one
        also added in another bucket (the write is then done again on the new latest snapshot)."""
        partitions = {e.partition for e in adds if e.index_type == HASH_INDEX}
        if not partitions:
            return
        base = self.base if self.base is not None and self.base.id == base_id else None

        def hash_files(snap: Snapshot | None) -> set[tuple[bytes, int, str]]:
            entries = read_index_manifest(self.table, snap.index_manifest) if snap and snap.index_manifest else []
            return {(e.partition, e.bucket, e.file_name) for e in entries
                    if e.index_type == HASH_INDEX and e.partition in partitions}

        if hash_files(base) != hash_files(latest):
            raise CommitConflictError(f"the HASH index of a partition this commit writes was changed concurrently "
                                      f"(snapshots {base_id + 1}..{latest.id}); nothing was committed, retry the "
                                      "write")

    def _check_append_vector_conflicts(self, base_id: int, latest: Snapshot, entries: list[ManifestEntry],
                                       adds: Sequence[IndexEntry]) -> None:
        """On an append table with deletion vectors, refuse vectors for data files a concurrent commit removed (the
        deletes would be lost) and the removal of data files whose vectors a concurrent commit changed (the
        rewritten files would bring the deleted rows back)."""
        if not self.table.has_append_vectors:
            return
        marked = {(a.partition, a.bucket, name) for a in adds if a.index_type == DV_INDEX for name in a.ranges}
        if marked:
            live = {(e.partition, e.bucket, e.file.file_name) for e in self.table.file_entries(latest)}
            if marked - live:
                raise CommitConflictError(f"data files this commit marks rows of were removed by a concurrent "
                                          f"commit (snapshots {base_id + 1}..{latest.id}); nothing was committed")
        removing = {(e.partition, e.bucket) for e in entries if e.kind == DELETE}
        if not removing:
            return
        base = self.base if self.base is not None and self.base.id == base_id else (
            self.snapshots.snapshot(base_id) if base_id > 0 else None)

        def vector_files(snap: Snapshot | None) -> set[tuple[bytes, int, str]]:
            found = read_index_manifest(self.table, snap.index_manifest) if snap and snap.index_manifest else []
            return {(e.partition, e.bucket, e.file_name) for e in found
                    if e.index_type == DV_INDEX and (e.partition, e.bucket) in removing}

        if vector_files(base) != vector_files(latest):
            raise CommitConflictError(f"the deletion vectors of files this commit replaces were changed by a "
                                      f"concurrent commit (snapshots {base_id + 1}..{latest.id}); nothing was "
                                      "committed")

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

