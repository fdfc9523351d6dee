"""What a table's page shows, read from the table with the format library: no Airflow, no HTML.

Every read is bounded so that a table with thousands of snapshots stays fast: the snapshot ids come from one
directory listing, only the snapshots of the page shown are read (with their delta manifests, for the records
and bytes each commit added and deleted), the tags are read once, and the change feed covers the newest
snapshots of the page only. The expiry preview is the library's bounded dry run (nothing is deleted): it reads
the snapshots the next run would expire, the first retained snapshot and the tags, never every snapshot.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from airflow_paimon.format import Table
from airflow_paimon.format.errors import PaimonError
from airflow_paimon.format.tag_file import Tag
from airflow_paimon.format.upkeep.expire_policy import ExpirePolicy
from airflow_paimon.format.upkeep.expiry_preview import DEFAULT_SHOWN, preview_snapshot_expiry, preview_tag_expiry
from airflow_paimon.format.upkeep.results import CleanupResult

__all__ = [
    "CHANGE_TYPES",
    "DEFAULT_PAGE_SIZE",
    "ChangeCounts",
    "ExpiryPreview",
    "SchemaField",
    "SnapshotRow",
    "TagRow",
    "Timeline",
    "changes_per_day",
    "driving_options",
    "expiry_preview",
    "schema_fields",
    "tag_rows",
    "timeline",
]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
CHANGE_TYPES = ("insert", "update_preimage", "update_postimage", "delete")
# Paimon's FileKind in manifest entries.
_ADD, _DELETE = 0, 1
# The options that drive periodic tags, retention (snapshots, tags, changelogs, consumers) and the changelog.
_DAY_MILLIS = 86_400_000
_READ_THREADS = 4
_DRIVING_PREFIXES = ("tag.", "snapshot.", "changelog", "consumer.", "incremental-between", "partition.expiration")


@dataclass(frozen=True)
class SnapshotRow:
    """One commit as the timeline shows it; ``added_*``/``deleted_*`` count the files of its delta manifests."""

    id: int
    commit_kind: str
    commit_time: dt.datetime
    commit_user: str
    commit_identifier: int
    total_records: int | None
    added_records: int
    deleted_records: int
    added_files: int
    deleted_files: int
    added_bytes: int
    deleted_bytes: int
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timeline:
    """One page of snapshots (newest first) and what holds for all of them."""

    rows: list[SnapshotRow]
    total: int
    earliest_id: int | None
    latest_id: int | None
    page: int
    pages: int
    page_size: int


@dataclass(frozen=True)
class TagRow:
    name: str
    snapshot_id: int
    commit_time: dt.datetime
    commit_user: str
    commit_identifier: int
    record_count: int | None
    create_time: dt.datetime | None
    expires_at: dt.datetime | None


@dataclass(frozen=True)
class SchemaField:
    id: int
    name: str
    type: str
    primary_key: bool
    partition_key: bool
    description: str | None


@dataclass(frozen=True)
class ExpiryPreview:
    """The retention in force and what the next snapshot and tag expiry would delete (dry runs)."""

    policy: ExpirePolicy
    threshold: dt.datetime
    keep_from: int | None
    snapshots: CleanupResult  # planned for the oldest len(snapshots.snapshots) of the expirable ones
    tags: CleanupResult
    expirable: int


@dataclass(frozen=True)
class ChangeCounts:
    """Rows of the change feed per day (UTC) and ``_change_type`` over (start, end] snapshots."""

    start: int | None
    end: int | None
    days: list[str] = field(default_factory=list)
    counts: dict[str, list[int]] = field(default_factory=dict)
    error: str | None = None


def _utc(millis: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc)


def _delta_stats(table: Table, delta_manifest_list: str) -> dict[str, int]:
    stats = dict.fromkeys(("added_records", "deleted_records", "added_files", "deleted_files", "added_bytes",
                           "deleted_bytes"), 0)
    io = table.manifest_io
    for meta in io.read_list(delta_manifest_list):
        for entry in io.read_entries(meta.file_name):
            side = "added" if entry.kind == _ADD else "deleted" if entry.kind == _DELETE else None
            if side is None:
                continue
            stats[f"{side}_records"] += entry.file.row_count
            stats[f"{side}_files"] += 1
            stats[f"{side}_bytes"] += entry.file.file_size
    return stats


def _row(table: Table, snapshot_id: int, tagged: dict[int, tuple[str, ...]],
         stats: dict[str, dict[str, int]]) -> SnapshotRow:
    snap = table.snapshot(snapshot_id)
    delta = stats.get(snap.delta_manifest_list)
    if delta is None:  # a manifest list never changes: snapshots that share one (copies) share its counts
        delta = stats[snap.delta_manifest_list] = _delta_stats(table, snap.delta_manifest_list)
    return SnapshotRow(id=snap.id, commit_kind=snap.commit_kind, commit_time=_utc(snap.time_millis),
                       commit_user=snap.commit_user, commit_identifier=snap.commit_identifier,
                       total_records=snap.total_record_count, tags=tagged.get(snap.id, ()), **delta)


def _tags_by_snapshot(tags: Sequence[Tag]) -> dict[int, tuple[str, ...]]:
    out: dict[int, list[str]] = {}
    for tag in tags:
        out.setdefault(tag.snapshot_id, []).append(tag.name)
    return {sid: tuple(sorted(names)) for sid, names in out.items()}


def timeline(table: Table, tags: Sequence[Tag], page: int = 1, page_size: int = DEFAULT_PAGE_SIZE) -> Timeline:
    """Page ``page`` (1 = newest) of the table's snapshots; out-of-range pages are clamped."""
    page_size = max(1, min(int(page_size), MAX_PAGE_SIZE))
    ids = table.snapshot_manager.ids()
    total = len(ids)
    pages = max(1, -(-total // page_size))
    page = max(1, min(int(page), pages))
    newest_first = ids[::-1][(page - 1) * page_size: page * page_size]
    tagged = _tags_by_snapshot(tags)
    stats: dict[str, dict[str, int]] = {}
    # The reads wait on the disk or the object store far more than they decode: a few run at once.
    with ThreadPoolExecutor(max_workers=_READ_THREADS) as pool:
        rows = list(pool.map(lambda sid: _row(table, sid, tagged, stats), newest_first))
    return Timeline(rows=rows, total=total, earliest_id=ids[0] if ids else None,
                    latest_id=ids[-1] if ids else None, page=page, pages=pages, page_size=page_size)


def tag_rows(tags: Sequence[Tag]) -> list[TagRow]:
    """The tags, newest snapshot first."""
    rows = [TagRow(name=t.name, snapshot_id=t.snapshot_id, commit_time=_utc(t.snapshot.time_millis),
                   commit_user=t.snapshot.commit_user, commit_identifier=t.snapshot.commit_identifier,
                   record_count=t.snapshot.total_record_count, create_time=t.create_time, expires_at=t.expires_at)
            for t in tags]
    return sorted(rows, key=lambda r: (-r.snapshot_id, r.name))


def schema_fields(table: Table) -> list[SchemaField]:
    schema = table.schema()
    return [SchemaField(id=f.id, name=f.name, type=f.type if isinstance(f.type, str) else json.dumps(f.type),
                        primary_key=f.name in schema.primary_keys, partition_key=f.name in schema.partition_keys,
                        description=f.description) for f in schema.fields]


def driving_options(options: dict[str, str]) -> list[tuple[str, str]]:
    """The table options that drive periodic tags, retention and the changelog producer, sorted by name."""
    return sorted((k, v) for k, v in options.items() if k.startswith(_DRIVING_PREFIXES))


def expiry_preview(table: Table, now: dt.datetime | None = None, shown: int = DEFAULT_SHOWN) -> ExpiryPreview:
    """A bounded dry run of the next snapshot expiry and tag expiry with the table's own options
    (format/upkeep/expiry_preview.py): the files of the oldest ``shown`` snapshots the run would expire."""
    moment = now or dt.datetime.now(dt.timezone.utc)
    policy = ExpirePolicy.from_options(table.options())
    snapshots = preview_snapshot_expiry(table, now=moment, policy=policy, shown=shown)
    tags = preview_tag_expiry(table, now=moment)
    return ExpiryPreview(policy=policy, threshold=_utc(policy.threshold_millis(int(moment.timestamp() * 1000))),
                         keep_from=snapshots.first_kept, snapshots=snapshots.result, tags=tags,
                         expirable=snapshots.expirable)


def changes_per_day(table: Table, start: int | None, end: int | None, mode: str = "auto") -> ChangeCounts:
    """Counts of the change feed over (start, end] per UTC day and change type; a feed the table cannot answer
    (expired range, a mode that cannot be answered) is reported in ``error``, never guessed."""
    if start is None or end is None or end <= start:
        return ChangeCounts(start, end)
    first_column = table.schema().fields[0].name
    try:
        feed = table.changes(start, end, columns=[first_column], mode=mode).read_all()
    except (PaimonError, ValueError) as exc:
        return ChangeCounts(start, end, error=str(exc))
    return ChangeCounts(start, end, *_count_by_day(feed))


def _count_by_day(feed: pa.Table) -> tuple[list[str], dict[str, list[int]]]:
    """Rows per UTC day and change type, grouped on whole columns (``_commit_timestamp`` is UTC millis)."""
    if feed.num_rows == 0:
        return [], {}
    millis = pc.cast(pc.cast(feed.column("_commit_timestamp"), pa.timestamp("ms")), pa.int64())
    days = pc.divide(millis, pa.scalar(_DAY_MILLIS, pa.int64()))
    grouped = pa.table({"day": days, "kind": feed.column("_change_type")}).group_by(["day", "kind"]).aggregate(
        [("kind", "count")]).to_pylist()
    day_numbers = sorted({int(g["day"]) for g in grouped})
    index = {d: i for i, d in enumerate(day_numbers)}
    counts: dict[str, list[int]] = {}
    for g in grouped:
        counts.setdefault(str(g["kind"]), [0] * len(day_numbers))[index[int(g["day"])]] = int(g["kind_count"])
    epoch = dt.date(1970, 1, 1)
    return [(epoch + dt.timedelta(days=d)).isoformat() for d in day_numbers], counts
