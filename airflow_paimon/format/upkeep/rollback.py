"""Rollback to a tag, a snapshot id or a point in time, deleting newer snapshots, newer tags and what only they used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidOptionError, PaimonError, SnapshotNotFoundError
from ..snapshot import Snapshot
from ..tag_file import Tag, replace_extra, same_snapshot
from ..time_travel import snapshot_at, utc_text
from ..values import count, epoch_millis, now_millis
from .long_lived_changelogs import LongLivedChangelogs
from .plan import existing_sizes, remove_roots_and_files
from .progress import Progress
from .results import CleanupResult
from .roots import Root, changelog_roots, check_supported, snapshot_roots, tag_roots

if TYPE_CHECKING:
    from ..table import Table


def _rollback_to_snapshot(table: "Table", value: Any) -> tuple[Snapshot, Tag | None]:
    snapshot_id = count(value, "to_snapshot")
    sm = table.snapshot_manager
    try:
        return sm.snapshot(snapshot_id), None
    except SnapshotNotFoundError:
        for tag in table.tags.list():
            if tag.snapshot.id == snapshot_id:
                return tag.snapshot, tag
        ids = sm.ids()
        held = f" (retained: {ids[0]}..{ids[-1]})" if ids else ""
        raise SnapshotNotFoundError(
            f"cannot roll {table.identifier} back to snapshot {snapshot_id}: it does not exist{held} and no tag "
            "holds it") from None


def _rollback_to_time(table: "Table", value: Any, now: Any) -> tuple[Snapshot, Tag | None]:
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidOptionError(f"to_time must be a point in time, not {value!r}")
    millis = epoch_millis(value, "to_time")
    now_ms = now_millis(now)
    if millis > now_ms:
        raise InvalidOptionError(
            f"to_time {utc_text(millis)} is in the future (now: {utc_text(now_ms)}); give a past time, or "
            "to_snapshot/to_tag")
    found = snapshot_at(table, millis, alternative="roll back to that tag by name (to_tag, --tag) if its state is "
                                                   "the one you want")
    return found.snapshot, table.tags.get(found.tag) if found.tag is not None else None


def _resolve_rollback_target(table: "Table", to_tag: Any, to_snapshot: Any, to_time: Any,
                             now: Any) -> tuple[Snapshot, Tag | None]:
    """Exactly one explicit target: a tag is never taken for a time, nor a time for a tag."""
    given = [n for n, v in (("to_tag", to_tag), ("to_snapshot", to_snapshot), ("to_time", to_time)) if v is not None]
    if len(given) != 1:
        raise InvalidOptionError(
            "give exactly one rollback target: to_tag (a tag name), to_snapshot (a snapshot id) or to_time "
            f"(a point in time); got {', '.join(given) if given else 'none'}")
    if to_tag is not None:
        name = to_tag.name if isinstance(to_tag, Tag) else to_tag
        if not isinstance(name, str) or not name.strip():
            raise InvalidOptionError(f"to_tag must be a tag name, not {to_tag!r}")
        tag = table.tags.get(name)
        return tag.snapshot, tag
    if to_snapshot is not None:
        return _rollback_to_snapshot(table, to_snapshot)
    return _rollback_to_time(table, to_time, now)


def rollback(table: "Table", to_tag: Any = None, to_snapshot: Any = None, to_time: Any = None,
             dry_run: bool = False, progress: Progress | None = None, now: Any = None) -> CleanupResult:
    """Make the snapshot of a tag, a snapshot id or a point in time the latest again.

    Newer snapshots, newer tags and newer long-lived changelogs are deleted (as Paimon's RollbackHelper does),
    with the files only they used. A tag whose snapshot expired is
    written back as that snapshot (as Paimon does). A time is resolved exactly (see time_travel.py): when the
    snapshot current then has expired and no tag provably holds it, the rollback is refused, since rolling back
    to an older tag would also remove commits made after it that the caller did not name.
    """
    target, via_tag = _resolve_rollback_target(table, to_tag, to_snapshot, to_time, now)
    check_supported(table)
    sm = table.snapshot_manager
    tm = table.tags
    result = CleanupResult("rollback", dry_run, rolled_back_to=target.id)
    snaps = snapshot_roots(table)
    existing = {int(r.name): r.snapshot for r in snaps}
    restore = False
    if target.id in existing:
        if not same_snapshot(existing[target.id], target):
            held = f"the snapshot tag {via_tag.name!r} holds" if via_tag is not None else "the one resolved"
            raise PaimonError(
                f"snapshot {target.id} of {table.identifier} is not {held} "
                "(the table was rolled back and re-committed since); roll back to the snapshot id instead")
    else:
        restore = True
        result.restored_snapshot = target.id
    newer = sorted((r for r in snaps if int(r.name) > target.id), key=lambda r: -int(r.name))
    tags = tag_roots(table)
    newer_tags = [r for r in tags if r.snapshot.id > target.id]
    changelogs = changelog_roots(table)
    newer_changelogs = sorted((r for r in changelogs if int(r.name) > target.id), key=lambda r: -int(r.name))
    removed = newer + newer_tags + newer_changelogs
    kept = [r for r in snaps if int(r.name) <= target.id] + [r for r in tags if r.snapshot.id <= target.id] + \
        [r for r in changelogs if int(r.name) <= target.id]
    if restore:
        kept.append(Root("snapshot", str(target.id), target))
    result.snapshots = [int(r.name) for r in newer]
    result.tags = sorted(r.name for r in newer_tags)
    cm = LongLivedChangelogs(table)
    paths = [sm.path(int(r.name)) for r in newer] + [tm.path(r.name) for r in newer_tags] + \
        [cm.path(int(r.name)) for r in newer_changelogs]
    root_files = existing_sizes(table.io, paths)
    result.metadata_files = [p for p in paths if p in root_files]
    result.bytes_freed = sum(root_files.values())

    def delete_roots() -> None:
        # 1. Newer tags first: once newer snapshots go, their ids may be committed again, and a surviving tag
        #    with such an id would not be the snapshot of that id any more.
        for r in newer_tags:
            table.io.delete(tm.path(r.name))
        # 2. A tag whose snapshot expired is written back as that snapshot. The hints are left alone until the
        #    end, so while newer snapshots exist they stay the latest (a crash here leaves the pre-rollback
        #    table plus one restored old snapshot, never a table without snapshots).
        if restore:
            snap = replace_extra(target)
            if not sm.create_snapshot(snap):
                current = Snapshot.from_json(table.io.read_text(sm.path(target.id)))
                if not same_snapshot(current, snap):
                    raise PaimonError(f"snapshot {target.id} appeared concurrently; rollback stopped before "
                                      "deleting any snapshot")
            sm.forget(target.id)
        # 3. Long-lived changelogs newer than the target, newest first, with Paimon's LATEST hint (-1 when none
        #    stays): a change feed must not read changes of commits rolled back.
        if newer_changelogs:
            remaining_changelogs = [r for r in changelogs if int(r.name) <= target.id]
            cm.latest_hint(target.id if remaining_changelogs else -1)
        for r in newer_changelogs:
            table.io.delete(cm.path(int(r.name)))
        # 4. Newer snapshots, newest first: a crash leaves a shorter, consistent history.
        for i, r in enumerate(newer):
            table.io.delete(sm.path(int(r.name)))
            sm.forget(int(r.name))
            if progress:
                progress("deleting newer snapshots", i + 1, len(newer))
        sm.commit_hint(target.id)
        remaining = sm.ids()
        if remaining and remaining[0] == target.id:
            sm.earliest_hint(target.id)

    return remove_roots_and_files(table, result, removed, kept, delete_roots, progress)
