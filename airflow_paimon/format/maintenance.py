"""`table.maintenance`: the upkeep operations that delete or rewrite files, in one place.

They are kept apart from reading and writing rows (`Table`) and from reading metadata (`table.inspect`), as
pyiceberg separates `maintenance` from `inspect`. Each one follows Paimon's rules for what stays live (see
format/upkeep/ and compact.py), takes `dry_run` where it deletes files, and changes nothing on bad input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .compaction_run import begin_compaction, compact_here
from .upkeep.changelog_expiry import expire_changelogs
from .upkeep.expire_policy import ExpirePolicy
from .upkeep.orphans import remove_orphan_files
from .upkeep.progress import Progress
from .upkeep.results import CleanupResult, OrphanResult
from .upkeep.rollback import rollback
from .upkeep.snapshot_expiry import consumer_min_next, expire_snapshots
from .upkeep.tag_cleanup import delete_tags, expire_tags
from .values import existing_tag_name

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .table import Table


class TableMaintenance:
    """Upkeep of one table: snapshot and tag expiry, tag deletion, rollback, orphan cleanup and compaction."""

    def __init__(self, table: "Table"):
        self.table = table

    def expire_snapshots(self, retain_min: int | None = None, retain_max: int | None = None,
                         older_than: Any = None, max_deletes: int | None = None, dry_run: bool = False,
                         *, now: Any = None, progress: Progress | None = None,
                         policy: ExpirePolicy | None = None) -> CleanupResult:
        """Expire the oldest snapshots by Paimon's options (`snapshot.num-retained.min/max`,
        `snapshot.time-retained`, `snapshot.expire.limit`), the values given, or one `policy` (an ExpirePolicy
        built from both); see upkeep/snapshot_expiry.py."""
        return expire_snapshots(self.table, retain_min, retain_max, older_than, max_deletes, dry_run, now, progress,
                                policy)

    def expire_changelogs(self, dry_run: bool = False, *, now: Any = None,
                          progress: Progress | None = None) -> CleanupResult:
        """Delete the long-lived changelogs (`changelog/changelog-<id>`) beyond `changelog.num-retained.min/max`
        and `changelog.time-retained`, with the files only they kept; see upkeep/changelog_expiry.py.
        `expire_snapshots` already runs this after it on a table whose changelog outlives its snapshots."""
        return expire_changelogs(self.table, dry_run, now, progress,
                                 consumer_next=consumer_min_next(self.table, True))

    def expire_tags(self, now: Any = None, dry_run: bool = False, *,
                    progress: Progress | None = None) -> CleanupResult:
        """Delete tags whose retention ran out, and the oldest periodic tags beyond `tag.num-retained-max`."""
        return expire_tags(self.table, now, dry_run, progress)

    def delete_tag(self, name: str, dry_run: bool = False) -> CleanupResult:
        """Delete a tag and the files only it used (files another tag or a retained snapshot uses stay)."""
        existing_tag_name(name)
        return delete_tags(self.table, [self.table.tags.get(name)], dry_run=dry_run)

    def rollback(self, *, to_tag: Any = None, to_snapshot: Any = None, to_time: Any = None, dry_run: bool = False,
                 progress: Progress | None = None, now: Any = None) -> CleanupResult:
        """Roll back to exactly one of a tag (by name), a snapshot id or a point in time (see upkeep/rollback.py).

        The target is named explicitly because a periodic tag's name (`2026-11-20`) also reads as a date: a tag
        that is gone must be an error, not a rollback to a time.
        """
        return rollback(self.table, to_tag, to_snapshot, to_time, dry_run, progress, now)

    def remove_orphan_files(self, older_than: Any = None, dry_run: bool = False, *, now: Any = None,
                            progress: Progress | None = None) -> OrphanResult:
        """Delete unreferenced files older than `older_than` (default: one day); see upkeep/orphans.py."""
        return remove_orphan_files(self.table, older_than, dry_run, now, progress)

    def compact(self, partitions: Iterable[Mapping[str, Any]] | None = None, *, commit_user: str | None = None,
                commit_identifier: int | None = None) -> "Snapshot | None":
        """Compact the table (or some partitions) in this process (see compact.py): one COMPACT commit, or None
        when nothing needs it. With `commit_user` and `commit_identifier`, a retry finds the landed commit."""
        run = begin_compaction(self.table, commit_user=commit_user, commit_identifier=commit_identifier,
                               partitions=partitions)
        if run.transaction.already_committed is not None:
            return run.transaction.already_committed
        result = compact_here(run)
        return self.table.snapshot(result["snapshot_id"]) if result["status"] == "committed" else None
