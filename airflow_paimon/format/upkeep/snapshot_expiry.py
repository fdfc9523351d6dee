"""Snapshot expiry: Paimon's retention rules, deleting only what no retained snapshot, tag or changelog uses."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..consumers import ConsumerManager
from ..values import duration, now_millis
from .changelog_expiry import expire_changelogs
from .changelog_policy import ChangelogPolicy
from .expire_policy import ExpirePolicy
from .long_lived_changelogs import LongLivedChangelogs
from .plan import existing_sizes, remove_roots_and_files
from .progress import Progress
from .results import CleanupResult
from .roots import Root, changelog_root, changelog_roots, check_supported, snapshot_roots, tag_roots

if TYPE_CHECKING:
    from ..table import Table


def consumer_min_next(table: "Table", dry_run: bool) -> int | None:
    """The lowest snapshot the live consumers still read (their lowest position). With
    `consumer.expiration-time`, consumers whose file was not written for that long lapse first (deleted, as
    Paimon's commit does before it expires snapshots; a dry run only leaves them out). File ages are measured
    against the clock, not `now`: modification times are real."""
    consumers = ConsumerManager(table)
    lapsed: dict[str, str] = {}
    ttl = table.options().get("consumer.expiration-time")
    if ttl is not None:
        age = duration(ttl, "consumer.expiration-time")
        lapsed = consumers.lapsed(int(time.time() * 1000) - int(age.total_seconds() * 1000))
        if not dry_run:
            for path in lapsed.values():
                table.io.delete(path)
    lowest = consumers.min_next(lapsed)
    if lowest is not None and table.has_append_vectors:
        # The delta feed of an append table with deletion vectors finds a snapshot's deletes by comparing its
        # vectors with the snapshot before it, so a consumer's range needs the snapshot before its position too
        # (beyond Paimon, which keeps the position only).
        return lowest - 1
    return lowest


def expire_snapshots(table: "Table", retain_min: Any = None, retain_max: Any = None, older_than: Any = None,
                     max_deletes: Any = None, dry_run: bool = False, now: Any = None,
                     progress: Progress | None = None, policy: ExpirePolicy | None = None) -> CleanupResult:
    """Expire the oldest snapshots as Paimon does (same options, same defaults), deleting only what no
    retained snapshot and no tag uses.

    The limits are ``policy`` (default: the table's options, see expire_policy.py) with the other arguments
    given in place of its own. Snapshot k may expire when: more than `retain_min` snapshots are newer or equal
    to it stay (at least the `retain_min` newest are kept), no consumer still reads it, it is among the
    `max_deletes` oldest, and the snapshot after it was committed before `older_than` (a point in time, or a
    duration before now; default: now - `snapshot.time-retained`); snapshots beyond the `retain_max` newest
    expire regardless of their age.

    When the table's changelog outlives its snapshots (changelog_policy.py), each expired snapshot is left
    behind as a long-lived changelog and changelog expiry runs right after, as Paimon's commit runs both.
    """
    overrides = {"retain_min": retain_min, "retain_max": retain_max, "older_than": older_than,
                 "max_deletes": max_deletes}
    chosen = ExpirePolicy.from_options(table.options(), **overrides) if policy is None else \
        policy.override(**overrides)
    rmin, rmax, limit = chosen.retain_min, chosen.retain_max, chosen.max_deletes
    threshold = chosen.threshold_millis(now_millis(now))
    check_supported(table)
    changelog_policy = ChangelogPolicy.from_options(table.options())  # read first: a bad value changes nothing
    result = expire_snapshots_only(table, rmin, rmax, limit, threshold, dry_run, progress,
                                   changelog_policy.decoupled)
    if changelog_policy.decoupled:  # as Paimon's commit runs them: changelog expiry right after snapshot expiry
        sm = table.snapshot_manager
        pending = {sid: sm.snapshot(sid) for sid in result.snapshots} if dry_run else None
        merge_results(table, result, expire_changelogs(table, dry_run, now, progress, changelog_policy,
                                                       consumer_min_next(table, True), pending))
    return result


def merge_results(table: "Table", into: CleanupResult, other: CleanupResult) -> None:
    """Both steps in one result. A dry run's second step also lists files the first would delete (they still
    exist): each is listed and counted once."""
    if not into.dry_run:
        into.data_files += other.data_files
        into.changelog_files += other.changelog_files
        into.metadata_files += other.metadata_files
        into.bytes_freed += other.bytes_freed
        return
    listed = set(into.files)
    fresh = {name: [p for p in getattr(other, name) if p not in listed]
             for name in ("data_files", "changelog_files", "metadata_files")}
    into.data_files += fresh["data_files"]
    into.changelog_files += fresh["changelog_files"]
    into.metadata_files += fresh["metadata_files"]
    into.bytes_freed += sum(existing_sizes(table.io, [p for paths in fresh.values() for p in paths]).values())


def expiry_stop(table: "Table", ids: list[int], rmin: int, rmax: int, limit: int, threshold: int,
                dry_run: bool) -> int:
    """The first snapshot id the next expiry keeps (every id below it expires). Reads only the snapshots whose
    commit time decides it: at most ``limit`` of them."""
    if not ids:
        return 0
    sm = table.snapshot_manager
    earliest, latest = ids[0], ids[-1]
    keep_from = max(latest - rmax + 1, earliest)
    end = latest - rmin + 1
    consumer = consumer_min_next(table, dry_run)
    if consumer is not None:
        end = min(end, consumer)
    end = min(end, earliest + limit)
    present = set(ids)
    for sid in range(keep_from, end):
        if sid + 1 in present and threshold <= sm.snapshot(sid + 1).time_millis:
            return sid
    return end


def expire_snapshots_only(table: "Table", rmin: int, rmax: int, limit: int, threshold: int, dry_run: bool,
                          progress: Progress | None, decoupled: bool) -> CleanupResult:
    """Snapshot expiry alone. With a decoupled changelog, each expired snapshot is first written as its
    long-lived changelog, which keeps its changelog files (or, without any, the files its commit added) alive."""
    result = CleanupResult("expire-snapshots", dry_run)
    sm = table.snapshot_manager
    ids = sm.ids()
    stop = expiry_stop(table, ids, rmin, rmax, limit, threshold, dry_run)
    expired = [sid for sid in ids if sid < stop]
    if not expired:
        return result
    kept_snaps = [r for r in snapshot_roots(table) if int(r.name) >= stop]
    if not kept_snaps:
        return result  # never expire the last snapshot
    removed = [Root("snapshot", str(sid), sm.snapshot(sid)) for sid in expired]
    kept = kept_snaps + tag_roots(table) + changelog_roots(table)
    if decoupled:
        kept += [changelog_root(sid, sm.snapshot(sid)) for sid in expired]
    changelogs = LongLivedChangelogs(table)
    result.snapshots = expired
    snapshot_files = existing_sizes(table.io, [sm.path(s) for s in expired])
    result.metadata_files = sorted(snapshot_files, key=lambda p: int(p.rsplit("-", 1)[1]))
    result.bytes_freed = sum(snapshot_files.values())

    def delete_snapshot_files() -> None:
        sm.earliest_hint(int(kept_snaps[0].name))
        for i, sid in enumerate(expired):  # oldest first: the retained range stays contiguous
            if decoupled:
                changelogs.keep(sm.path(sid), sid)
            table.io.delete(sm.path(sid))
            sm.forget(sid)
            if progress:
                progress("deleting expired snapshots", i + 1, len(expired))

    return remove_roots_and_files(table, result, removed, kept, delete_snapshot_files, progress)
