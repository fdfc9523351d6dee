"""`Table.changes`: the rows that changed in (start, end] as an Arrow stream in Delta's change-feed model.

Bounds are Paimon's (start exclusive, end inclusive), not Delta's (both inclusive). Every check (bounds, mode,
each snapshot of the range, the schemas the rows were written with) runs before the first row is read, so a
range the mode cannot answer raises instead of streaming part of an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..consumers import ConsumerManager
from ..errors import InvalidOptionError, SnapshotExpiredError, UnsupportedTableError
from ..evolution import file_columns
from ..manifest import ManifestEntry
from ..scan import DECODED_PER_FILE_BYTE
from .bounds import Bound, latest_bound, resolve_bound
from .diff import diff_results, diff_units, end_entries
from .options import OPTION_KEYS, check_mode, request_from_options
from .ranges import ChangeModeError, RangeUnit, check_range, range_batches, range_units
from .rows import change_batch, change_schema, needed_columns

if TYPE_CHECKING:
    import pyarrow.dataset as ds

    from ..table import Table


def resolve_mode(table: "Table", mode: str, start: Bound, end: Bound) -> str:
    """`auto`: a diff between two tags (as Paimon), else `changelog` when the table has a producer, else `delta`."""
    if mode != "auto":
        return mode
    if start.tag is not None and end.tag is not None and table.is_primary_key:
        return "diff"
    return "delta" if table.core_options.changelog_producer == "none" else "changelog"


def _check_schemas(table: "Table", schema_ids: set[int], names: list[str], where: str) -> None:
    """Refuse, before reading, a range whose rows were written under a schema whose columns cannot be read as
    the current ones (a type change with no cast)."""
    current = table.schema()
    for sid in sorted(schema_ids):
        if sid == current.id:
            continue
        old = table.schema_by_id(sid)
        cols = file_columns(current, old, names)
        for name, source in zip(cols.names, cols.sources):
            if source is None:
                continue
            src_type, dst_type = old.arrow_type(source), current.arrow_type(name)
            if src_type == dst_type:
                continue
            try:
                pa.array([], src_type).cast(dst_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                raise UnsupportedTableError(
                    f"{where} crosses schema {sid} of {table.identifier}, where column {name!r} was {src_type}, "
                    f"which cannot be read as today's {dst_type}; read a range after that change") from None


def _consumer_start(table: "Table", consumer_id: str) -> Bound:
    nxt = ConsumerManager(table).require(consumer_id)
    earliest = table.snapshot_manager.earliest_id()
    if earliest is not None and nxt < earliest:
        raise SnapshotExpiredError(
            f"consumer {consumer_id!r} of {table.identifier} is at snapshot {nxt}, which expired (earliest "
            f"retained: {earliest}); its changes since cannot be read in order: reset it (to {earliest} or a "
            "later snapshot) after reading what it missed with mode='diff' from a tag")
    return resolve_bound(table, nxt - 1, f"consumer {consumer_id!r} position")


def _stream(table: "Table", mode: str, start: Bound, end: Bound, names: list[str], schema: pa.Schema,
            filter: "ds.Expression | None", planned: list[RangeUnit],
            ends: tuple[list[ManifestEntry], list[ManifestEntry]]) -> Iterator[pa.RecordBatch]:
    if mode == "diff":
        assert end.snapshot is not None
        version, millis = end.id, end.snapshot.time_millis
        def finish(rows: pa.Table, kinds: np.ndarray) -> pa.Table:
            return change_batch(table, rows, kinds, version, millis, schema, filter)

        for batch in diff_results(table, ends[0], ends[1], names, (start.snapshot, end.snapshot), finish):
            yield from batch.to_batches()
        return
    for rows, kinds, snap in range_batches(table, planned, names):
        yield from change_batch(table, rows, kinds, snap.id, snap.time_millis, schema, filter).to_batches()


@dataclass
class ChangePlan:
    """What a change feed reads, decided and checked before any row is read: the mode, the two ends, the table
    columns to read (`names`), the feed's `schema`, and the files: per snapshot of the range, in the feed's order
    (`planned`: changelog and delta) or the live files at both ends (`ends`: diff). `empty`: nothing to read."""

    mode: str
    start: Bound | None
    end: Bound | None
    names: list[str]
    schema: pa.Schema
    filter: "ds.Expression | None"
    planned: list[RangeUnit] = field(default_factory=list)
    ends: tuple[list[ManifestEntry], list[ManifestEntry]] = ([], [])
    empty: bool = False

    @property
    def read_bytes(self) -> int:
        """The decoded size of the files the feed reads, an estimate from their Parquet sizes that engines compare
        with a memory budget (for a diff, the files of the buckets whose files differ between the ends; a
        deletion-vector bucket whose vectors alone changed is not counted)."""
        if self.empty:
            return 0
        if self.mode == "diff":
            entries = [e for before, after in diff_units(self.ends) for e in before + after]
        else:
            entries = [u.entry for u in self.planned]
        return sum(e.file.file_size for e in entries) * DECODED_PER_FILE_BYTE

    def reader(self, table: "Table") -> pa.RecordBatchReader:
        if self.empty:
            return pa.RecordBatchReader.from_batches(self.schema, iter(()))
        assert self.start is not None and self.end is not None
        return pa.RecordBatchReader.from_batches(self.schema, _stream(
            table, self.mode, self.start, self.end, self.names, self.schema, self.filter, self.planned, self.ends))


def changes(table: "Table", start: Any = None, end: Any = None, *, columns: Sequence[str] | None = None,
            filter: "ds.Expression | None" = None, mode: str = "auto", consumer_id: str | None = None,
            options: Mapping[str, str] | None = None) -> pa.RecordBatchReader:
    return plan_changes(table, start, end, columns=columns, filter=filter, mode=mode, consumer_id=consumer_id,
                        options=options).reader(table)


def plan_changes(table: "Table", start: Any = None, end: Any = None, *, columns: Sequence[str] | None = None,
                 filter: "ds.Expression | None" = None, mode: str = "auto", consumer_id: str | None = None,
                 options: Mapping[str, str] | None = None) -> ChangePlan:
    """`changes` up to the first row read: every check done, the files to read listed (metadata only), so that
    other engines (Spark) can spread the reading."""
    table.require_readable()
    mode = check_mode(mode)
    logical = table.arrow_schema()
    wanted = list(columns) if columns is not None else logical.names
    unknown = [c for c in wanted if c not in logical.names]
    if unknown:
        raise InvalidOptionError(f"columns: {unknown} are not columns of {table.identifier} ({logical.names})")
    schema = change_schema(table, wanted)
    empty = ChangePlan(mode, None, None, wanted, schema, filter, empty=True)
    if consumer_id is not None:
        if start is not None:
            raise InvalidOptionError("give either start or consumer_id: a consumer's position is its start")
        start_bound = _consumer_start(table, consumer_id)
    elif start is None:
        if end is not None:
            raise InvalidOptionError("end without start: give the start of the range (exclusive) too")
        merged = {**table.options(), **(options or {})}
        request = request_from_options(table, merged)
        if request is None:
            raise InvalidOptionError(f"give start (and end) or consumer_id, or set one of {', '.join(OPTION_KEYS)}")
        if request.empty:
            return empty
        start, end = request.start, request.end
        mode = request.mode if mode == "auto" else mode
        start_bound = resolve_bound(table, start, "start")
    else:
        start_bound = resolve_bound(table, start, "start")
    end_bound = latest_bound(table) if end is None else resolve_bound(table, end, "end")
    if start_bound.id > end_bound.id:
        raise InvalidOptionError(f"{start_bound.given} (snapshot {start_bound.id}) is after {end_bound.given} "
                                 f"(snapshot {end_bound.id}); the range is (start, end]")
    mode = resolve_mode(table, mode, start_bound, end_bound)
    if start_bound.id == end_bound.id:
        return empty
    names = needed_columns(table, wanted, filter, keys=mode == "diff")
    planned: list[RangeUnit] = []
    ends: tuple[list[ManifestEntry], list[ManifestEntry]] = ([], [])
    if mode == "diff":
        if not table.is_primary_key:
            raise ChangeModeError(f"mode 'diff' compares rows by primary key, and {table.identifier} has none; "
                                  "use mode='delta'")
        for b in (start_bound, end_bound):
            if not b.readable:
                raise SnapshotExpiredError(f"{b.given}: snapshot {b.id} of {table.identifier} expired and no tag "
                                           "holds it, so mode 'diff' cannot read that end; use a tag or a "
                                           "retained snapshot")
        ends = end_entries(table, start_bound, end_bound)
        schema_ids = {e.file.schema_id for side in ends for e in side}
    else:
        snaps = check_range(table, start_bound, end_bound, mode)
        planned = range_units(table, start_bound, snaps, mode)
        schema_ids = {u.entry.file.schema_id for u in planned}
    _check_schemas(table, schema_ids, names, f"the range ({start_bound.id}, {end_bound.id}]")
    return ChangePlan(mode, start_bound, end_bound, names, schema, filter, planned, ends)
