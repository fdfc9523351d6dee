"""The index manifest (`manifest/index-manifest-*`, a snapshot's `indexManifest`): every index file the snapshot
uses, whatever its kind (HASH for dynamic buckets, DELETION_VECTORS, global indexes).

Paimon keeps only ADD entries in it: each commit reads the previous index manifest, applies its own index changes
and writes the whole list again (IndexManifestFileHandler). Index kinds kept per bucket (HASH, and deletion
vectors of bucketed tables) are replaced by (partition, bucket, kind): a new file for a bucket replaces the
bucket's previous one. Other kinds are combined by file name. Index files live in `index/` unless an entry names
an external path.
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import fastavro

from .manifest import ADD, DELETE, ManifestIO

HASH_INDEX = "HASH"
DELETION_VECTORS_INDEX = "DELETION_VECTORS"
# Kinds Paimon keeps one file of per (partition, bucket, kind).
BUCKETED_KINDS = frozenset({HASH_INDEX, DELETION_VECTORS_INDEX})

_NS = "org.apache.paimon.avro.generated.record"
_VERSION = 1

INDEX_MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": _NS,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_DELETIONS_VECTORS_RANGES", "default": None, "type": ["null", {"type": "array", "items": {
            "type": "record", "name": f"{_NS}__DELETIONS_VECTORS_RANGES", "fields": [
                {"name": "f0", "type": "string"},
                {"name": "f1", "type": "int"},
                {"name": "f2", "type": "int"},
                {"name": "_CARDINALITY", "type": ["null", "long"], "default": None},
            ]}}]},
        {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
        {"name": "_GLOBAL_INDEX", "default": None, "type": ["null", {
            "type": "record", "name": f"{_NS}__GLOBAL_INDEX", "fields": [
                {"name": "_ROW_RANGE_START", "type": "long"},
                {"name": "_ROW_RANGE_END", "type": "long"},
                {"name": "_INDEX_FIELD_ID", "type": "int"},
                {"name": "_EXTRA_FIELD_IDS", "type": ["null", {"type": "array", "items": "int"}], "default": None},
                {"name": "_INDEX_META", "type": ["null", "bytes"], "default": None},
                {"name": "_SOURCE_META", "type": ["null", "bytes"], "default": None},
            ]}]},
    ],
})


@dataclass(frozen=True)
class IndexFileMeta:
    """One index file (Paimon's IndexFileMeta). `extra` keeps the kind-specific fields (deletion-vector ranges,
    global index metadata) as read, so that a commit that does not touch them writes them back unchanged."""

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    external_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"index_type": self.index_type, "file_name": self.file_name, "file_size": self.file_size,
                "row_count": self.row_count, "external_path": self.external_path}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "IndexFileMeta":
        return cls(d["index_type"], d["file_name"], int(d["file_size"]), int(d["row_count"]), d.get("external_path"))


@dataclass(frozen=True)
class IndexManifestEntry:
    kind: int
    partition: bytes
    bucket: int
    file: IndexFileMeta

    @property
    def bucket_key(self) -> tuple[bytes, int, str]:
        return (self.partition, self.bucket, self.file.index_type)

    def to_avro(self) -> dict[str, Any]:
        f = self.file
        return {"_VERSION": _VERSION, "_KIND": self.kind, "_PARTITION": self.partition, "_BUCKET": self.bucket,
                "_INDEX_TYPE": f.index_type, "_FILE_NAME": f.file_name, "_FILE_SIZE": f.file_size,
                "_ROW_COUNT": f.row_count, "_EXTERNAL_PATH": f.external_path,
                "_DELETIONS_VECTORS_RANGES": f.extra.get("_DELETIONS_VECTORS_RANGES"),
                "_GLOBAL_INDEX": f.extra.get("_GLOBAL_INDEX")}

    @classmethod
    def from_avro(cls, rec: dict[str, Any]) -> "IndexManifestEntry":
        extra = {k: rec[k] for k in ("_DELETIONS_VECTORS_RANGES", "_GLOBAL_INDEX") if rec.get(k) is not None}
        meta = IndexFileMeta(rec["_INDEX_TYPE"], rec["_FILE_NAME"], rec["_FILE_SIZE"], rec["_ROW_COUNT"],
                             rec.get("_EXTERNAL_PATH"), extra)
        return cls(rec["_KIND"], rec["_PARTITION"], rec["_BUCKET"], meta)


def read_index_manifest(manifests: ManifestIO, name: str | None) -> list[IndexManifestEntry]:
    """The entries of a snapshot's index manifest (none without one)."""
    if not name:
        return []
    return [IndexManifestEntry.from_avro(r) for r in manifests.read_records(name, "index manifest")]


def write_index_manifest(manifests: ManifestIO, entries: Sequence[IndexManifestEntry]) -> str:
    name = f"index-manifest-{uuid.uuid4()}-0"
    buf = io.BytesIO()
    fastavro.writer(buf, INDEX_MANIFEST_ENTRY_SCHEMA, [e.to_avro() for e in entries], codec=manifests.codec)
    manifests.io.write_bytes(manifests.path(name), buf.getvalue())
    return name


def combine(previous: Iterable[IndexManifestEntry], changes: Iterable[IndexManifestEntry]) -> list[IndexManifestEntry]:
    """The index files after `changes` (ADD and DELETE entries) are applied to `previous` (ADD entries), as
    Paimon's IndexManifestFileHandler combines them: deletes first, then adds; bucketed kinds by (partition,
    bucket, kind), the others by file name."""
    live: dict[tuple, IndexManifestEntry] = {}

    def key(e: IndexManifestEntry) -> tuple:
        return ("bucket", *e.bucket_key) if e.file.index_type in BUCKETED_KINDS else ("file", e.file.file_name)

    for e in previous:
        live[key(e)] = e
    changes = list(changes)
    for e in changes:
        if e.kind == DELETE:
            live.pop(key(e), None)
    for e in changes:
        if e.kind == ADD:
            live[key(e)] = e
    return list(live.values())


def index_file_path(table_path: str, meta: IndexFileMeta) -> str:
    return meta.external_path or f"{table_path}/index/{meta.file_name}"
