"""What a MERGE did, as one value: the application prints it (`to_dict`) and the operator pushes it to XCom."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any

from airflow_paimon.format import Snapshot

__all__ = ["Written", "MergeResult"]


@dataclass
class Written:
    """The outcome of one way of merging (driver upsert, Spark upsert, general merge): what it committed, and
    what it read and how, for the result."""

    snapshot: Snapshot | None
    rows: dict[str, int]
    mode: str
    engine: str = "spark"
    timings: dict[str, float] | None = None
    target_splits_read: int = 0
    target_rows_read: int = 0
    details: dict[str, Any] = field(default_factory=dict)


# Present in every result, even when None (no snapshot yet, no commit user); the other fields only when known.
_ALWAYS = ("target", "commit_user", "commit_identifier", "status", "snapshot_id")


@dataclass
class MergeResult:
    """A MERGE's result: `status` is ``committed``, ``no_changes`` or ``already_committed``; `snapshot_id` the
    snapshot holding it (or the unchanged base)."""

    target: str
    commit_user: str | None
    commit_identifier: int | None
    status: str = ""
    snapshot_id: int | None = None
    message: str | None = None
    engine: str | None = None
    mode: str | None = None
    source: dict[str, Any] | None = None
    rows: dict[str, int] | None = None
    target_splits_read: int | None = None
    target_rows_read: int | None = None
    target_columns_read: list[str] | None = None
    single_task: bool | None = None
    small_source: bool | None = None
    sequence_guard: list[str] | None = None
    timings: dict[str, float] | None = None
    seconds: float | None = None

    @classmethod
    def already_committed(cls, target: str, user: str | None, identifier: int | None, snapshot_id: int,
                          message: str) -> "MergeResult":
        return cls(target, user, identifier, status="already_committed", snapshot_id=snapshot_id, message=message)

    @classmethod
    def finished(cls, target: str, user: str | None, identifier: int | None, source: dict[str, Any] | None,
                 written: Written, base: Snapshot | None, started: float) -> "MergeResult":
        """The result of a merge that ran: committed `written.snapshot`, or nothing to commit on `base`."""
        snap = written.snapshot
        result = cls(target, user, identifier, engine=written.engine, mode=written.mode, source=source,
                     rows=written.rows, target_splits_read=written.target_splits_read,
                     target_rows_read=written.target_rows_read, timings=written.timings, **written.details)
        if snap is None:
            result.status, result.snapshot_id = "no_changes", base.id if base is not None else None
        else:
            result.status, result.snapshot_id = "committed", snap.id
        result.seconds = round(time.monotonic() - started, 3)
        return result

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the fields that apply to this merge (see `_ALWAYS`)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or f.name in _ALWAYS:
                out[f.name] = value
        return out
