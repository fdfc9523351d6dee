"""Snapshots (`snapshot/snapshot-<id>` JSON) and the EARLIEST/LATEST hint files next to them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from .errors import CorruptFileError, SnapshotNotFoundError
from .fileio import FileIO

SNAPSHOT_VERSION = 3
BATCH_COMMIT_IDENTIFIER = 2**63 - 1

# JSON name -> attribute name, in the order Paimon writes them.
_FIELDS = [
    ("version", "version"),
    ("id", "id"),
    ("schemaId", "schema_id"),
    ("baseManifestList", "base_manifest_list"),
    ("baseManifestListSize", "base_manifest_list_size"),
    ("deltaManifestList", "delta_manifest_list"),
    ("deltaManifestListSize", "delta_manifest_list_size"),
    ("changelogManifestList", "changelog_manifest_list"),
    ("changelogManifestListSize", "changelog_manifest_list_size"),
    ("indexManifest", "index_manifest"),
    ("commitUser", "commit_user"),
    ("commitIdentifier", "commit_identifier"),
    ("commitKind", "commit_kind"),
    ("timeMillis", "time_millis"),
    ("logOffsets", "log_offsets"),
    ("totalRecordCount", "total_record_count"),
    ("deltaRecordCount", "delta_record_count"),
    ("changelogRecordCount", "changelog_record_count"),
    ("watermark", "watermark"),
    ("statistics", "statistics"),
    ("properties", "properties"),
    ("nextRowId", "next_row_id"),
]
_KNOWN = {j for j, _ in _FIELDS}


@dataclass(frozen=True)
class Snapshot:
    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    total_record_count: int | None = None
    delta_record_count: int | None = None
    changelog_manifest_list: str | None = None
    changelog_record_count: int | None = None
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    log_offsets: dict | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: dict | None = None
    next_row_id: int | None = None
    version: int = SNAPSHOT_VERSION
    # Fields Paimon may add later (and tag-only fields such as tagCreateTime) survive a read/write cycle.
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        for json_name, attr in _FIELDS:
            value = getattr(self, attr)
            if value is not None:
                doc[json_name] = value
        doc.update(self.extra)
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "Snapshot":
        kwargs = {attr: doc[json_name] for json_name, attr in _FIELDS if json_name in doc}
        kwargs.setdefault("version", 1)
        extra = {k: v for k, v in doc.items() if k not in _KNOWN}
        return cls(extra=extra, **kwargs)

    @classmethod
    def from_json(cls, text: str) -> "Snapshot":
        return cls.from_dict(json.loads(text))


def read_snapshot_file(io: FileIO, path: str, kind: str) -> Snapshot:
    """A snapshot-shaped JSON file (snapshot, tag or changelog); CorruptFileError naming the file when it does not
    parse, so that the one bad file can be found and restored."""
    data = io.read_bytes(path)
    try:
        return Snapshot.from_json(data.decode("utf-8"))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        reason = "empty" if not data.strip() else str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CorruptFileError(f"{kind} file {path} is not valid Paimon JSON ({reason}); restore it from a backup, "
                               f"or remove it if the {kind} can be given up") from None


class SnapshotManager:
    """Finds snapshots by id and time; the hint files are only hints and are verified on use."""

    def __init__(self, io: FileIO, table_path: str):
        self.io = io
        self.dir = f"{table_path}/snapshot"
        self._cache: dict[int, Snapshot] = {}

    def path(self, snapshot_id: int) -> str:
        return f"{self.dir}/snapshot-{snapshot_id}"

    def exists(self, snapshot_id: int) -> bool:
        return self.io.is_file(self.path(snapshot_id))

    def snapshot(self, snapshot_id: int) -> Snapshot:
        cached = self._cache.get(snapshot_id)
        if cached is not None:
            return cached
        try:
            snap = read_snapshot_file(self.io, self.path(snapshot_id), "snapshot")
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist (never committed or expired)") \
                from None
        self._cache[snapshot_id] = snap
        return snap

    def forget(self, snapshot_id: int) -> None:
        self._cache.pop(snapshot_id, None)

    def ids(self) -> list[int]:
        out = []
        for info in self.io.list_dir(self.dir):
            name = info.path.rsplit("/", 1)[-1]
            if name.startswith("snapshot-") and name[9:].isdigit():
                out.append(int(name[9:]))
        return sorted(out)

    def _hint(self, name: str) -> int | None:
        try:
            text = self.io.read_text(f"{self.dir}/{name}").strip()
            return int(text) if text.isdigit() else None
        except FileNotFoundError:
            return None

    def latest_id(self) -> int | None:
        hint = self._hint("LATEST")
        if hint is not None and self.exists(hint):
            n = hint
            while self.exists(n + 1):
                n += 1
            return n
        ids = self.ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        hint = self._hint("EARLIEST")
        if hint is not None and self.exists(hint) and not self.exists(hint - 1):
            return hint
        ids = self.ids()
        return ids[0] if ids else None

    def latest(self) -> Snapshot | None:
        n = self.latest_id()
        return self.snapshot(n) if n is not None else None

    def create_snapshot(self, snap: Snapshot) -> bool:
        """Create the snapshot file only if absent; False when another writer took this id first."""
        return self.io.create_exclusive(self.path(snap.id), snap.to_json().encode())

    def commit_hint(self, latest: int) -> None:
        self.io.write_bytes(f"{self.dir}/LATEST", str(latest).encode())

    def earliest_hint(self, earliest: int) -> None:
        self.io.write_bytes(f"{self.dir}/EARLIEST", str(earliest).encode())

    def snapshots(self) -> Iterator[Snapshot]:
        for n in self.ids():
            try:
                yield self.snapshot(n)
            except SnapshotNotFoundError:
                continue  # expired between listing and reading

    def latest_at_or_before(self, time_millis: int) -> Snapshot | None:
        """Binary search: snapshot times increase with their ids."""
        lo, hi = self.earliest_id(), self.latest_id()
        if lo is None or hi is None:
            return None
        found = None
        while lo <= hi:
            mid = (lo + hi) // 2
            snap = self.snapshot(mid)
            if snap.time_millis <= time_millis:
                found = snap
                lo = mid + 1
            else:
                hi = mid - 1
        return found
