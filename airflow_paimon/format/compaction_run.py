"""One COMPACT commit from its start to its result, whoever compacts the buckets: this process (`compact_here`) or
Spark tasks (spark/compact_app.py). Both begin and finish it here, so a compaction reports the same result, and
finds its own landed commit on a retry, whichever engine ran it.

Callers choosing an engine compare `total_bytes`, the decoded size of every bucket to compact, with their memory
budget: buckets are compacted one at a time, so memory holds one bucket, but a compaction too large for a worker's
budget is also too slow for one process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from .commit import CommitId, Transaction
from .commit_message import CommitMessage
from .compact import compact_split, max_level, plan_compaction
from .scan import DECODED_PER_FILE_BYTE, Split

if TYPE_CHECKING:
    from .table import Table

__all__ = ["CompactionRun", "begin_compaction", "compact_here"]


@dataclass
class CompactionRun:
    """A COMPACT commit in progress: its transaction, the buckets that need compaction and the result so far
    (`done` once the result is final: the commit had already landed, or nothing needs compaction)."""

    table: "Table"
    transaction: Transaction
    splits: list[Split]
    result: dict[str, Any]
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> bool:
        return "status" in self.result

    @property
    def total_bytes(self) -> int:
        """The decoded size of every bucket to compact (an estimate from the Parquet file sizes)."""
        return sum(_decoded_bytes(s) for s in self.splits)

    def finish(self, messages: Sequence[CommitMessage]) -> dict[str, Any]:
        """Commit the compacted buckets' messages as one COMPACT snapshot; the final result."""
        result = self.result
        result["files_before"] = sum(len(m.deleted_files) for m in messages)
        result["files_after"] = sum(len(m.new_files) for m in messages)
        snap = self.transaction.commit(list(messages)) if messages else None
        result.update(status="committed" if snap is not None else "no_changes",
                      snapshot_id=snap.id if snap is not None else None,
                      seconds=round(time.monotonic() - self.started, 3))
        return result


def _decoded_bytes(split: Split) -> int:
    return sum(f.file_size for f in split.files) * DECODED_PER_FILE_BYTE


def begin_compaction(table: "Table", *, commit_user: str | None = None, commit_identifier: int | None = None,
                     partitions: Iterable[Mapping[str, Any]] | None = None) -> CompactionRun:
    """Open the COMPACT transaction and plan the buckets to compact against its base snapshot.

    The transaction declares the table's changelog producer: compacting a lookup or full-compaction table writes
    the changelog of what it merges (compact.py), and the commit lists it. A table the library does not write is
    refused here, before any task of an engine starts."""
    table.require_writable()
    tx = table.transaction(commit_id=CommitId.of(commit_user, commit_identifier), kind="COMPACT",
                           commit_user=commit_user, changelog=table.core_options.changelog_producer)
    result: dict[str, Any] = {"target": table.identifier, "commit_user": commit_user,
                              "commit_identifier": commit_identifier}
    existing = tx.already_committed
    if existing is not None:
        result.update(status="already_committed", snapshot_id=existing.id,
                      message=f"compaction {commit_user!r}/{commit_identifier} is already in snapshot "
                              f"{existing.id}; nothing to do")
        return CompactionRun(table, tx, [], result)
    base = tx.base
    splits = plan_compaction(table, base, partitions)
    result["buckets"] = len(splits)
    result["level"] = max_level(table) if table.is_primary_key else 0
    run = CompactionRun(table, tx, splits, result)
    if not splits:
        result.update(status="no_changes", snapshot_id=base.id if base is not None else None, seconds=0.0)
    return run


def compact_here(run: CompactionRun, target_size: int | None = None) -> dict[str, Any]:
    """Compact the run's buckets in this process, one at a time, and commit them."""
    if run.done:
        return run.result
    messages = [m for m in (compact_split(run.table, s, target_size) for s in run.splits) if m is not None]
    return run.finish(messages)
