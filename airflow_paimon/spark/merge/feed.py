"""A MERGE source that is another Paimon table's change feed: a range of its commits, or what a consumer has not
read yet, mirrored into the target (deleted keys delete, every other change upserts).

Per key, the last change in commit order wins: the feed is read in commit order and reduced to one row per key on
the driver (a running reduction over the streamed batches, so memory holds the changed keys, not the range);
update pre-images carry no new state and are dropped. A reduced feed of at most ``driver_bytes`` (with the default
mirroring clauses) is written and committed by the application itself; anything else runs the general MERGE on
Spark with a ``_change`` column (``+U`` or ``-D``).

Exactly-once without the caller's help: the commit identifier is derived from the source table and the range's
start (for a consumer: its position), and the commit records the range's end in its snapshot properties. A retry
that finds the commit (after a kill between the commit and the consumer's advance, or in a later run) only
advances the consumer past that end; the consumer is advanced only after the commit landed.

No pyspark imports: the driver path must not start the JVM side of the session.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_paimon.format import Catalog, Table
from airflow_paimon.format.changes import request_from_options
from airflow_paimon.format.changes.bounds import resolve_bound
from airflow_paimon.format.commit import CommitId, Transaction
from airflow_paimon.format.consumers import check_consumer_id
from airflow_paimon.format.data_file import DELETE, INSERT
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.kernels import CHANGE_COLUMN
from airflow_paimon.format.snapshot import Snapshot
from airflow_paimon.merge import FEED_KEY, normalize_on, parse_clauses

from ..common import stable_int64
from .result import MergeResult, Written
from .spec import MergeSpec

__all__ = ["FEED_KEY", "FEED_PROPERTY", "FeedRange", "is_change_feed", "open_feed", "reduce_feed", "feed_kinds",
           "write_feed_in_driver", "settled_feed_merge", "merge_settled_feed"]

FEED_PROPERTY = "airflow-paimon.change-feed"
"""The snapshot property recording which range of which table a commit applied (JSON)."""

_ALLOWED = {FEED_KEY, "start", "end", "to_auto_tag", "consumer_id", "mode", "warehouse", "options"}
_ORDER = "__feed_order"
_PRE_IMAGE = "update_preimage"


def is_change_feed(source: Any) -> bool:
    return isinstance(source, Mapping) and FEED_KEY in source


@dataclass(frozen=True)
class FeedRange:
    """The resolved range (start, end] of the source table (snapshot ids) and how to read it."""

    table: Table
    start: int
    end: int
    mode: str
    consumer_id: str | None

    def identifier(self, user: str | None) -> int:
        """The commit identifier of applying this range: stable across runs and retries. For a consumer only the
        start counts, so that a retry finding newer source commits still recognises the commit that landed."""
        anchor: tuple[Any, ...] = ("consumer", self.consumer_id, self.start) if self.consumer_id else \
            ("range", self.start, self.end)
        return stable_int64("change-feed", user, self.table.path, *anchor)

    def describe(self) -> dict[str, Any]:
        return {"kind": "change_feed", "table": self.table.identifier, "start": self.start, "end": self.end,
                "mode": self.mode, "consumer_id": self.consumer_id}

    def property(self) -> dict[str, str]:
        return {FEED_PROPERTY: json.dumps({"table": self.table.identifier, "start": self.start, "end": self.end,
                                           "consumer_id": self.consumer_id})}

    def advance_past(self, end: int) -> int | None:
        """Move the consumer past `end` (a commit applying up to it landed); never backwards. The new position."""
        if self.consumer_id is None:
            return None
        current = self.table.consumers.require(self.consumer_id)
        if end + 1 > current:
            return self.table.consumers.advance(self.consumer_id, end + 1)
        return current


def open_feed(source: Mapping[str, Any], catalog: Catalog) -> FeedRange:
    """The source's range, resolved to snapshot ids now: a consumer's end is the latest snapshot at this moment,
    so that it is advanced past exactly what was read."""
    unknown = set(source) - _ALLOWED
    if unknown:
        raise InvalidOptionError(f"source: unknown change-feed key(s) {sorted(unknown)}; known: {sorted(_ALLOWED)}")
    cat = Catalog(source["warehouse"], source.get("options") or {}) if source.get("warehouse") else catalog
    table = cat.get_table(source[FEED_KEY])
    mode = str(source.get("mode") or "auto").strip().lower()
    given = [k for k in ("start", "to_auto_tag", "consumer_id") if source.get(k) not in (None, "")]
    if len(given) != 1:
        raise InvalidOptionError(f"source: a change feed needs exactly one of start (with an optional end), "
                                 f"to_auto_tag or consumer_id; got {given or 'none'}")
    if source.get("end") not in (None, "") and given != ["start"]:
        raise InvalidOptionError("source: end only goes with start (a consumer or an auto tag sets its own end)")
    latest = table.snapshot_manager.latest_id() or 0
    if given == ["consumer_id"]:
        consumer = check_consumer_id(source["consumer_id"])
        position = table.consumers.require(consumer)
        return FeedRange(table, position - 1, max(latest, position - 1), mode, consumer)
    if given == ["to_auto_tag"]:
        request = request_from_options(table, {"incremental-to-auto-tag": str(source["to_auto_tag"])})
        if request is None or request.empty:
            tag = resolve_bound(table, str(source["to_auto_tag"]), "to_auto_tag")
            return FeedRange(table, tag.id, tag.id, mode, None)
        start, end = request.start, request.end
        mode = request.mode if mode == "auto" else mode
    else:
        start, end = source["start"], source.get("end")
    first = resolve_bound(table, start, "start").id
    last = resolve_bound(table, end, "end").id if end not in (None, "") else latest
    if first > last:
        raise InvalidOptionError(f"source: the change feed's start {start!r} (snapshot {first}) is after its end "
                                 f"(snapshot {last})")
    return FeedRange(table, first, last, mode, None)


def reduce_feed(feed: FeedRange, keys: Sequence[str], reduce_rows: int = 1 << 20) -> pa.Table:
    """One row per key, the last change in commit order, with `CHANGE_COLUMN` ``-D`` (deleted) or ``+U``.

    Batches are reduced once the unreduced rows outnumber the kept ones (and `reduce_rows`): memory holds the
    changed keys, and the work stays linear in the feed."""
    columns = feed.table.schema().field_names + ["_change_type"]
    kept: pa.Table | None = None
    pending: list[pa.Table] = []
    seen = pending_rows = 0
    if feed.start != feed.end:
        for batch in feed.table.changes(feed.start, feed.end, mode=feed.mode):
            part = pa.Table.from_batches([batch]).select(columns)
            part = part.filter(pc.not_equal(part.column("_change_type"), pa.scalar(_PRE_IMAGE)))
            if part.num_rows == 0:
                continue
            pending.append(part.append_column(_ORDER, pa.array(np.arange(seen, seen + part.num_rows,
                                                                         dtype=np.int64))))
            seen += part.num_rows
            pending_rows += part.num_rows
            if pending_rows >= max(kept.num_rows if kept is not None else 0, reduce_rows):
                kept = _last_per_key(pa.concat_tables(([kept] if kept is not None else []) + pending), keys)
                pending, pending_rows = [], 0
    if pending:
        kept = _last_per_key(pa.concat_tables(([kept] if kept is not None else []) + pending), keys)
    if kept is None:
        kept = _feed_schema(feed.table).empty_table().append_column(_ORDER, pa.array([], pa.int64()))
    kept = kept.sort_by(_ORDER)
    change = pc.if_else(pc.equal(kept.column("_change_type"), pa.scalar("delete")), "-D", "+U")
    return kept.select(feed.table.schema().field_names).append_column(CHANGE_COLUMN, change.cast(pa.string()))


def _feed_schema(table: Table) -> pa.Schema:
    return table.arrow_schema().append(pa.field("_change_type", pa.string()))


def _last_per_key(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    missing = [k for k in keys if k not in rows.column_names]
    if missing:
        raise InvalidOptionError(f"source: the change feed has no column {missing[0]!r} of the MERGE's on columns "
                                 f"{list(keys)}")
    last = rows.group_by(list(keys), use_threads=False).aggregate([(_ORDER, "max")])
    return rows.filter(pc.is_in(rows.column(_ORDER), last.column(f"{_ORDER}_max")))


def _deleted(rows: pa.Table) -> pa.Array | pa.ChunkedArray:
    return pc.equal(rows.column(CHANGE_COLUMN), pa.scalar("-D"))


def feed_kinds(rows: pa.Table) -> pa.Array:
    """Each reduced row's RowKind: a delete for ``-D``, else an insert (an upsert under merge-on-read)."""
    deleted = _deleted(rows).to_numpy(zero_copy_only=False)
    return pa.array(np.where(deleted, DELETE, INSERT).astype(np.int8))


def mirrors(clauses: Any, on: Any, table: Table) -> bool:
    """Whether the merge uses the default mirroring (no clauses given, matched on the target's key)."""
    if clauses is not None:
        parse_clauses(clauses)   # malformed clauses fail here, as on the Spark path
        return False
    names = table.schema().field_names
    return set(normalize_on(on, table.primary_keys, names)) == set(table.primary_keys)


def write_feed_in_driver(table: Table, rows: pa.Table, tx: Transaction) -> tuple[Snapshot | None, dict[str, int]]:
    """Write the reduced feed as new level-0 rows (upserts and deletes; no target data read) and commit once."""
    kinds = feed_kinds(rows)
    data = rows.drop_columns([CHANGE_COLUMN])
    messages = table.new_write().write(data, kinds, base_snapshot=tx.base, duplicates="error",
                                       what="the change feed")
    deleted = int(pc.sum(_deleted(rows)).as_py() or 0)
    counts = {"upserted": rows.num_rows - deleted, "deleted": deleted}
    return (tx.commit(messages) if messages else None), counts


def feed_transaction(table: Table, feed: FeedRange, user: str | None) -> Transaction:
    """The transaction applying `feed`; both ways of writing it write the changelog the target's producer asks
    for (the library's write path in the driver, the merge's own on Spark)."""
    return table.transaction(commit_id=CommitId.of(user, feed.identifier(user)), commit_user=user,
                             properties=feed.property(), changelog=table.core_options.changelog_producer)


def earlier_landing(table: Table, feed: FeedRange, user: str | None) -> Snapshot | None:
    """The snapshot of an earlier commit of this range (a retry), if any."""
    return table.find_commit(CommitId(user, feed.identifier(user))) if user is not None else None


def recorded_end(snapshot: Snapshot, feed: FeedRange) -> int:
    """The end of the range an earlier commit applied (its snapshot property), else this range's end."""
    props = snapshot.properties or {}
    try:
        return int(json.loads(props[FEED_PROPERTY])["end"])
    except (KeyError, ValueError, TypeError):
        return feed.end


def feed_written(snapshot: Snapshot | None, counts: Mapping[str, int]) -> Written:
    return Written(snapshot, dict(counts), "change_feed", engine="driver")


def settled_feed_merge(spec: MergeSpec, table: Table, feed: FeedRange, started: float) -> MergeResult | None:
    """The result of merging `feed` into `table` when it reads no change: the range's commit already landed (the
    consumer is then moved past the end that commit applied, as a retry after a kill between the two needs), or
    the range is empty (nothing is committed; the result names the unchanged latest snapshot). None when the
    feed must be read."""
    user = spec.commit_user
    ident = feed.identifier(user) if user is not None else None
    landed = earlier_landing(table, feed, user)
    if landed is not None:
        end = recorded_end(landed, feed)
        position = feed.advance_past(end)
        message = (f"the change feed of {feed.table.identifier} up to snapshot {end} is already in snapshot "
                   f"{landed.id} of {table.identifier}; nothing to merge" +
                   (f" (consumer {feed.consumer_id!r} now at {position})" if feed.consumer_id else ""))
        print(message, flush=True)
        return MergeResult.already_committed(table.identifier, user, ident, landed.id, message)
    # Bad input fails either way: the key and the clauses are checked as a merge that reads checks them.
    normalize_on(spec.on, table.primary_keys, table.schema().field_names)
    mirrors(spec.clauses, spec.on, table)
    if feed.start != feed.end:
        return None
    tx = feed_transaction(table, feed, user)
    feed.advance_past(feed.end)
    return MergeResult.finished(table.identifier, user, ident, feed.describe(),
                                feed_written(None, {"upserted": 0, "deleted": 0}), tx.base, started)


def merge_settled_feed(spec: MergeSpec) -> dict[str, Any] | None:
    """`settled_feed_merge` for a worker deciding whether a change-feed MERGE needs its Spark application at all
    (a re-run of a day already merged, a consumer with nothing new): the application's result then, without a
    ``spark-submit``; None when the application must run (it also gives the errors of a target that cannot
    take the feed)."""
    if not is_change_feed(spec.source) or spec.reapply:
        return None
    catalog = Catalog(spec.warehouse, spec.options)
    table = catalog.get_table(spec.target)
    if not table.is_primary_key or table.core_options.write_refusal:
        return None
    started = time.monotonic()
    feed = open_feed(spec.source, catalog)
    result = settled_feed_merge(spec, table, feed, started)
    return None if result is None else result.to_dict()
