"""What one writer changed in one bucket: the unit a writer hands to the commit, and what Spark tasks send back to
the driver as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .deletion_vectors_index import IndexEntry
from .manifest import ADD, DELETE, DataFileMeta, ManifestEntry


@dataclass
class CommitMessage:
    """What one writer changed in one bucket; JSON-serialisable via to_dict.

    As Paimon's commit messages: the new-files increment (`new_files`, `deleted_files` and the `changelog_files`
    describing them) lands in the writer's snapshot; the compact increment (`compact_before` replaced by
    `compact_after`, with `compact_changelog`) lands in a COMPACT snapshot right after it.
    """

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    deleted_files: list[DataFileMeta] = field(default_factory=list)
    changelog_files: list[DataFileMeta] = field(default_factory=list)
    compact_before: list[DataFileMeta] = field(default_factory=list)
    compact_after: list[DataFileMeta] = field(default_factory=list)
    compact_changelog: list[DataFileMeta] = field(default_factory=list)
    # Index files (deletion vectors) added with each increment, and the names of those they replace.
    index_adds: list[IndexEntry] = field(default_factory=list)
    index_deletes: list[str] = field(default_factory=list)
    compact_index_adds: list[IndexEntry] = field(default_factory=list)
    compact_index_deletes: list[str] = field(default_factory=list)

    _LISTS = ("new_files", "deleted_files", "changelog_files", "compact_before", "compact_after",
              "compact_changelog")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"partition": self.partition.hex(), "bucket": self.bucket,
                               "total_buckets": self.total_buckets}
        for name in self._LISTS:
            out[name] = [f.to_dict() for f in getattr(self, name)]
        for name in ("index_adds", "compact_index_adds"):
            out[name] = [e.to_dict() for e in getattr(self, name)]
        out["index_deletes"], out["compact_index_deletes"] = self.index_deletes, self.compact_index_deletes
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CommitMessage":
        lists: dict[str, Any] = {name: [DataFileMeta.from_dict(f) for f in d.get(name, [])] for name in cls._LISTS}
        for name in ("index_adds", "compact_index_adds"):
            lists[name] = [IndexEntry.from_dict(e) for e in d.get(name, [])]
        for name in ("index_deletes", "compact_index_deletes"):
            lists[name] = list(d.get(name, []))
        return cls(bytes.fromhex(d["partition"]), d["bucket"], d["total_buckets"], **lists)

    def _entries(self, kind: int, files: Sequence[DataFileMeta]) -> list[ManifestEntry]:
        return [ManifestEntry(kind, self.partition, self.bucket, self.total_buckets, f) for f in files]

    def entries(self) -> list[ManifestEntry]:
        return self._entries(DELETE, self.deleted_files) + self._entries(ADD, self.new_files)

    def changelog_entries(self) -> list[ManifestEntry]:
        return self._entries(ADD, self.changelog_files)

    def compact_entries(self) -> list[ManifestEntry]:
        return self._entries(DELETE, self.compact_before) + self._entries(ADD, self.compact_after)

    def compact_changelog_entries(self) -> list[ManifestEntry]:
        return self._entries(ADD, self.compact_changelog)
