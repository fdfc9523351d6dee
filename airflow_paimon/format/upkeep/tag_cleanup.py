"""Deleting and expiring tags, and what a replaced tag no longer holds, with the files only those tags used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ..auto_tags import AutoTagRule, retained_max_surplus
from ..errors import SnapshotNotFoundError, UnsupportedTableError
from ..periods import PeriodSpec
from ..snapshot import Snapshot, SnapshotManager
from ..tag_file import Tag, local_now, same_snapshot, to_local_naive
from .plan import existing_sizes, remove_roots_and_files
from .progress import Progress
from .results import CleanupResult
from .roots import Root, all_roots, changelog_roots, check_supported, snapshot_roots, tag_roots

if TYPE_CHECKING:
    from ..table import Table


def delete_tags(table: "Table", tags: Sequence[Tag], dry_run: bool = False, operation: str = "delete-tag",
                progress: Progress | None = None) -> CleanupResult:
    """Delete these tags and the files only they used."""
    check_supported(table)
    result = CleanupResult(operation, dry_run)
    if not tags:
        return result
    names = {t.name for t in tags}
    removed = [Root("tag", t.name, t.snapshot) for t in tags]
    sm = table.snapshot_manager
    if all(sm.exists(t.snapshot.id) and same_snapshot(_try_snapshot(sm, t.snapshot.id), t.snapshot) for t in tags):
        # Every tag marks a retained snapshot: they hold no file of their own (Paimon's shortcut, checked
        # against the snapshot's content rather than its id only).
        kept = [Root("snapshot", str(t.snapshot.id), t.snapshot) for t in tags]
    else:
        kept = snapshot_roots(table) + [r for r in tag_roots(table) if r.name not in names] + \
            changelog_roots(table)
    tm = table.tags
    tag_files = existing_sizes(table.io, [tm.path(n) for n in sorted(names)])
    result.tags = sorted(names)
    result.metadata_files = sorted(tag_files)
    result.bytes_freed = sum(tag_files.values())

    def delete_tag_files() -> None:
        for n in sorted(names):
            table.io.delete(tm.path(n))

    return remove_roots_and_files(table, result, removed, kept, delete_tag_files, progress)


def _try_snapshot(sm: SnapshotManager, snapshot_id: int) -> Snapshot:
    try:
        return sm.snapshot(snapshot_id)
    except (SnapshotNotFoundError, ValueError):
        return Snapshot(-1, -1, "", "", "", -1, "", -1)


def cleanup_after_tag_replace(table: "Table", old: Tag) -> CleanupResult:
    """The tag file now points elsewhere: delete what only its old snapshot used."""
    result = CleanupResult("replace-tag", False)
    try:
        check_supported(table)
    except UnsupportedTableError:
        return result  # branches may share the old files: keep them
    kept = all_roots(table)
    if any(same_snapshot(r.snapshot, old.snapshot) for r in kept):
        return result
    return remove_roots_and_files(table, result, [Root("tag", old.name, old.snapshot)], kept, lambda: None, None)


def tags_to_expire(table: "Table", now: Any = None) -> list[tuple[Tag, str]]:
    """(tag, reason) for tags whose retention ran out and for the oldest periodic tags beyond
    `tag.num-retained-max` (periodic: named by the table's period formatter, see periods.py; on a table Paimon
    auto-tags, its auto tags on the oldest snapshots, see auto_tags.py)."""
    options = table.options()
    auto = AutoTagRule.from_options(options)
    spec = PeriodSpec.from_options(options) if auto is None else None
    now_local = local_now() if now is None else to_local_naive(now)
    out: list[tuple[Tag, str]] = []
    remaining: list[Tag] = []
    tags = table.tags.list()
    for tag in tags:
        expires = tag.expires_at
        if expires is not None and now_local > expires:
            out.append((tag, f"retention {tag.time_retained} ran out at {expires.isoformat(sep=' ')}"))
        else:
            remaining.append(tag)
    if auto is not None:
        # Paimon counts before it expires by time (TagAutoManager runs creation, then TagTimeExpire).
        timed_out = {t.name for t, _ in out}
        for tag in retained_max_surplus(auto, tags):
            if tag.name not in timed_out:
                out.append((tag, f"more than tag.num-retained-max = {auto.num_retained_max} auto-created tags"))
    elif spec is not None and spec.num_retained_max is not None:
        periodic = []
        for tag in remaining:
            period = spec.parse_tag_name(tag.name)
            if period is not None:
                periodic.append((period.start, tag))
        periodic.sort(key=lambda p: p[0])
        surplus = len(periodic) - spec.num_retained_max
        for _, tag in periodic[:max(surplus, 0)]:
            out.append((tag, f"more than tag.num-retained-max = {spec.num_retained_max} periodic tags"))
    return out


def expire_tags(table: "Table", now: Any = None, dry_run: bool = False,
                progress: Progress | None = None) -> CleanupResult:
    expiring = tags_to_expire(table, now)
    check_supported(table)
    return delete_tags(table, [t for t, _ in expiring], dry_run, "expire-tags", progress)
