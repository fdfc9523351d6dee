"""A bounded preview of the next snapshot and tag expiry: what they would delete, read in time for a web page.

Expiry itself (snapshot_expiry.py, tag_cleanup.py) reads every retained snapshot to know which files stay live:
on a table with 10,000 snapshots that is 10,000 snapshot files and their manifest lists. The preview applies
Paimon's own rule instead (``ExpireSnapshotsImpl``, ``TagDeletion``): history is linear (each snapshot's files
are its predecessor's plus its delta; a rollback removes the newer snapshots), and a data file is never added
again once deleted, so a file an older snapshot uses and a retained snapshot still uses is used by the *first*
retained snapshot too. The live set is therefore read from the first retained snapshot, the tags of snapshots
older than it (a tag of a retained snapshot holds nothing more, when its content is that snapshot's) and the
long-lived changelogs: a read bounded by the tags and the snapshots that expire, whatever the number of
snapshots retained. On a table that Paimon's commit protocol
wrote (this library, Paimon, pypaimon) the preview lists exactly the files the expiry deletes; where a table broke
the rule, expiry keeps more than the preview shows, never less (it checks every retained snapshot).

Of the snapshots the next run would expire (at most ``snapshot.expire.limit``), the files of the oldest
``shown`` are planned, and the preview says how many of how many it covers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..tag_file import Tag, same_snapshot
from ..values import now_millis
from .changelog_expiry import expire_changelogs
from .changelog_policy import ChangelogPolicy
from .expire_policy import ExpirePolicy
from .plan import existing_sizes, remove_roots_and_files
from .results import CleanupResult
from .roots import Root, changelog_root, changelog_roots, check_supported, tag_roots
from .snapshot_expiry import consumer_min_next, expiry_stop, merge_results
from .tag_cleanup import delete_tags, tags_to_expire

if TYPE_CHECKING:
    from ..table import Table

__all__ = ["DEFAULT_SHOWN", "SnapshotExpiryPreview", "preview_snapshot_expiry", "preview_tag_expiry"]

DEFAULT_SHOWN = 100


@dataclass(frozen=True)
class SnapshotExpiryPreview:
    """The plan of the oldest ``len(result.snapshots)`` of the ``expirable`` snapshots the next run expires."""

    result: CleanupResult
    expirable: int
    first_kept: int | None

    @property
    def complete(self) -> bool:
        return len(self.result.snapshots) == self.expirable


def _nothing() -> None:
    """A dry run removes no root file."""


def preview_snapshot_expiry(table: "Table", now: Any = None, policy: ExpirePolicy | None = None,
                            shown: int = DEFAULT_SHOWN) -> SnapshotExpiryPreview:
    """A dry run of the next snapshot expiry with ``policy`` (default: the table's options), planned for the
    oldest ``shown`` of the snapshots it would expire."""
    if shown < 1:
        raise ValueError(f"shown must be at least 1, not {shown}")
    chosen = ExpirePolicy.from_options(table.options()) if policy is None else policy
    threshold = chosen.threshold_millis(now_millis(now))
    check_supported(table)
    changelog_policy = ChangelogPolicy.from_options(table.options())
    result = CleanupResult("expire-snapshots", True)
    sm = table.snapshot_manager
    ids = sm.ids()
    stop = expiry_stop(table, ids, chosen.retain_min, chosen.retain_max, chosen.max_deletes, threshold, True)
    expired = [sid for sid in ids if sid < stop]
    kept_ids = [sid for sid in ids if sid >= stop]
    if not expired or not kept_ids:  # never the last snapshot
        return SnapshotExpiryPreview(result, 0, ids[0] if ids else None)
    head = expired[:shown]
    removed = [Root("snapshot", str(sid), sm.snapshot(sid)) for sid in head]
    first = sm.snapshot(kept_ids[0])
    kept = [Root("snapshot", str(first.id), first)] + _tags_not_covered(table, stop) + changelog_roots(table)
    if changelog_policy.decoupled:  # every expired snapshot stays behind as a long-lived changelog
        pending = {sid: sm.snapshot(sid) for sid in expired}
        kept += [changelog_root(sid, snap) for sid, snap in pending.items()]
    result.snapshots = head
    snapshot_files = existing_sizes(table.io, [sm.path(s) for s in head])
    result.metadata_files = sorted(snapshot_files, key=lambda p: int(p.rsplit("-", 1)[1]))
    result.bytes_freed = sum(snapshot_files.values())
    remove_roots_and_files(table, result, removed, kept, _nothing, None)
    if changelog_policy.decoupled:
        merge_results(table, result, expire_changelogs(table, True, now, None, changelog_policy,
                                                       consumer_min_next(table, True), pending))
    return SnapshotExpiryPreview(result, len(expired), kept_ids[0])


def preview_tag_expiry(table: "Table", now: Any = None) -> CleanupResult:
    """A dry run of the next tag expiry. A tag of an expired snapshot is planned against the earliest retained
    snapshot, the other tags and the long-lived changelogs (Paimon's rule, see above); a tag whose snapshot is
    still retained with the same content frees no data file. Any other tag (one whose snapshot id is retained
    but whose content differs, after a rollback) is planned by tag expiry itself, against every root."""
    expiring = [t for t, _ in tags_to_expire(table, now)]
    check_supported(table)
    result = CleanupResult("expire-tags", True)
    if not expiring:
        return result
    sm = table.snapshot_manager
    ids = sm.ids()
    if not ids or any(t.snapshot_id >= ids[0] and not _retained_as_tagged(table, t) for t in expiring):
        return delete_tags(table, expiring, True, "expire-tags")
    names = {t.name for t in expiring}
    earliest = sm.snapshot(ids[0])
    retained = [Root("snapshot", str(t.snapshot_id), t.snapshot) for t in expiring if t.snapshot_id >= ids[0]]
    kept = [Root("snapshot", str(ids[0]), earliest)] + retained + \
        [r for r in tag_roots(table) if r.name not in names] + changelog_roots(table)
    tag_files = existing_sizes(table.io, [table.tags.path(n) for n in sorted(names)])
    result.tags = sorted(names)
    result.metadata_files = sorted(tag_files)
    result.bytes_freed = sum(tag_files.values())
    return remove_roots_and_files(table, result, [Root("tag", t.name, t.snapshot) for t in expiring], kept,
                                  _nothing, None)


def _tags_not_covered(table: "Table", stop: int) -> list[Root]:
    """The tags whose files the first retained snapshot does not stand for: a tag of a retained snapshot, with
    that snapshot's content, holds no file an expired snapshot uses that the first retained one does not (a
    file alive before and after it is alive at it); every other tag is read."""
    return [Root("tag", t.name, t.snapshot) for t in table.tags.list()
            if t.snapshot_id < stop or not _retained_as_tagged(table, t)]


def _retained_as_tagged(table: "Table", tag: Tag) -> bool:
    sm = table.snapshot_manager
    return sm.exists(tag.snapshot_id) and same_snapshot(sm.snapshot(tag.snapshot_id), tag.snapshot)
