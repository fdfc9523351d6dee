"""Changelog expiry: Paimon's ``ExpireChangelogImpl`` over the long-lived changelogs snapshot expiry left behind,
deleting only what no retained snapshot, tag or changelog uses."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Mapping

from ..snapshot import Snapshot
from ..values import now_millis
from .changelog_policy import ChangelogPolicy
from .long_lived_changelogs import LongLivedChangelogs
from .plan import existing_sizes, remove_roots_and_files
from .progress import Progress
from .results import CleanupResult
from .roots import Root, changelog_root, check_supported, long_lived_changelogs, snapshot_roots, tag_roots

if TYPE_CHECKING:
    from ..table import Table


def expire_changelogs(table: "Table", dry_run: bool = False, now: Any = None, progress: Progress | None = None,
                      policy: ChangelogPolicy | None = None, consumer_next: int | None = None,
                      pending: Mapping[int, Snapshot] | None = None) -> CleanupResult:
    """Delete the oldest long-lived changelogs beyond ``changelog.num-retained.min/max`` and
    ``changelog.time-retained`` (each defaulting to its ``snapshot.*`` option), with the files only they kept.

    As Paimon counts: ids are counted back from the latest *snapshot*; changelog k may go when fewer than
    ``retain_min`` snapshots are newer, no consumer still reads it, it is among the ``snapshot.expire.limit``
    oldest, and it was itself committed more than ``time_retained`` before ``now``; changelogs before the
    ``retain_max`` newest ids go whatever their age. The newest changelog always stays (Paimon's bound).

    ``pending`` (a dry run of snapshot expiry): snapshots that run would turn into changelogs, planned as if it
    had (they count as changelogs, not as snapshots).
    """
    chosen = ChangelogPolicy.from_options(table.options()) if policy is None else policy
    threshold = now_millis(now) - chosen.time_retained // dt.timedelta(milliseconds=1)
    check_supported(table)
    result = CleanupResult("expire-changelogs", dry_run)
    pending = pending or {}
    snaps = [r for r in snapshot_roots(table) if int(r.name) not in pending]
    changelogs = {**long_lived_changelogs(table), **pending}
    if not snaps or not changelogs:
        return result
    latest = int(snaps[-1].name)
    ids = sorted(changelogs)
    earliest_cl, latest_cl = ids[0], ids[-1]
    low = max(latest - chosen.retain_max + 1, earliest_cl)
    end = latest - chosen.retain_min + 1
    if consumer_next is not None:
        end = min(end, consumer_next)
    end = min(end, earliest_cl + chosen.max_deletes, latest_cl)
    if end <= earliest_cl:
        return result
    stop = end
    for cid in range(low, end + 1):
        found = changelogs.get(cid)
        if found is not None and threshold <= found.time_millis:
            stop = cid
            break
    expired = [cid for cid in ids if cid < stop]
    if not expired or stop not in changelogs:  # Paimon too stops without the changelog that ends the range
        return result
    # A removed changelog offers everything it names (its base list too, which Paimon's ChangelogDeletion also
    # deletes); only what no kept root uses goes.
    removed = [Root("changelog", str(cid), changelogs[cid]) for cid in expired]
    kept = snaps + tag_roots(table) + [changelog_root(cid, changelogs[cid]) for cid in ids if cid >= stop]
    files = LongLivedChangelogs(table)
    paths = [files.path(cid) for cid in expired]
    sizes = existing_sizes(table.io, paths)
    result.metadata_files = [p for p in paths if p in sizes]
    result.bytes_freed = sum(sizes.values())

    def delete_changelog_files() -> None:
        for i, cid in enumerate(expired):  # oldest first: the retained range stays contiguous
            table.io.delete(files.path(cid))
            if progress:
                progress("deleting expired changelogs", i + 1, len(expired))
        files.earliest_hint(stop)

    return remove_roots_and_files(table, result, removed, kept, delete_changelog_files, progress)
