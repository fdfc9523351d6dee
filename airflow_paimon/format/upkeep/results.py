"""What an upkeep operation deleted or, with dry_run, would delete: one result type per kind of operation."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class CleanupResult:
    """What an upkeep operation deleted (or, with dry_run, would delete)."""

    operation: str
    dry_run: bool
    snapshots: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    changelog_files: list[str] = field(default_factory=list)
    metadata_files: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    restored_snapshot: int | None = None
    rolled_back_to: int | None = None

    @property
    def files(self) -> list[str]:
        """Every file deleted: data, changelog and metadata files (snapshot and tag files included)."""
        return self.data_files + self.changelog_files + self.metadata_files

    @property
    def snapshots_expired(self) -> int:
        return len(self.snapshots)

    @property
    def files_freed(self) -> int:
        return len(self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "dry_run": self.dry_run,
            "snapshots": list(self.snapshots),
            "tags": list(self.tags),
            "data_files": list(self.data_files),
            "changelog_files": list(self.changelog_files),
            "metadata_files": list(self.metadata_files),
            "files_freed": self.files_freed,
            "bytes_freed": self.bytes_freed,
            "restored_snapshot": self.restored_snapshot,
            "rolled_back_to": self.rolled_back_to,
        }

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        parts = []
        if self.snapshots:
            parts.append(f"{len(self.snapshots)} snapshot(s) {_ranges(self.snapshots)}")
        if self.tags:
            parts.append(f"{len(self.tags)} tag(s) {', '.join(repr(t) for t in self.tags)}")
        parts.append(f"{len(self.data_files)} data file(s), {len(self.changelog_files)} changelog file(s), "
                     f"{len(self.metadata_files)} metadata file(s), {human_bytes(self.bytes_freed)}")
        text = f"{self.operation}: {verb} " + "; ".join(parts)
        if self.rolled_back_to is not None:
            text += f"; latest snapshot is now {self.rolled_back_to}"
        if self.restored_snapshot is not None:
            text += " (restored from its tag)"
        return text


@dataclass
class OrphanFile:
    path: str
    size: int
    mtime_ms: int


@dataclass
class OrphanResult:
    """What orphan cleanup found and deleted, in the worker or on Spark alike (one shape for both)."""

    dry_run: bool
    older_than_ms: int
    files: list[OrphanFile] = field(default_factory=list)
    scanned: int = 0
    target: str = ""
    listing_units: int = 1
    files_deleted: int = 0
    seconds: float = 0.0

    @property
    def bytes_freed(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def status(self) -> str:
        if self.dry_run:
            return "dry_run"
        return "deleted" if self.files else "nothing_to_delete"

    def to_dict(self, max_files: int | None = None) -> dict[str, Any]:
        """The result as JSON-ready data; `files` lists the orphans' paths (the first `max_files` of them)."""
        return {
            "operation": "remove-orphan-files",
            "target": self.target,
            "status": self.status,
            "dry_run": self.dry_run,
            "older_than": dt.datetime.fromtimestamp(self.older_than_ms / 1000, dt.timezone.utc).isoformat(),
            "scanned": self.scanned,
            "listing_units": self.listing_units,
            "files": self.paths[:max_files],
            "files_found": len(self.files),
            "files_freed": len(self.files),
            "files_deleted": self.files_deleted,
            "bytes_freed": self.bytes_freed,
            "seconds": round(self.seconds, 3),
        }

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"remove-orphan-files: scanned {self.scanned} file(s), {verb} {len(self.files)} orphan file(s), "
                f"{human_bytes(self.bytes_freed)}")


def human_bytes(n: int | None) -> str:
    """`n` bytes for people: ``512 B``, ``3.4 MiB``; empty for an unknown size."""
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _ranges(ids: Sequence[int]) -> str:
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"{start}" if start == end else f"{start}..{end}" for start, end in runs)
