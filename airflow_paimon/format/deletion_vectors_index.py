"""The index manifest (`manifest/index-manifest-*`, a snapshot's `indexManifest`) and the deletion vectors it lists.

An index manifest holds the table's whole index, not a delta: one ADD entry per index file (Paimon's
`IndexManifestEntry`: partition, bucket, `IndexFileMeta` with, for DELETION_VECTORS files, the range of each data
file's vector). Entries of other index types (HASH, global indexes) are carried from one snapshot to the next
untouched. Index files live in `index/` unless an entry gives an external path or the table keeps them in the
bucket folder (`index-file-in-data-file-dir`).
"""

from __future__ import annotations

import io as _io
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import fastavro
import numpy as np

from .deletion_vectors import INDEX_TYPE, VectorRange, read_vectors
from .errors import CommitConflictError
from .manifest import ADD, AVRO_NAMESPACE, DELETE
from .values import option_boolean

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .table import Table

INDEX_MANIFEST_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": AVRO_NAMESPACE,
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
            "type": "record", "name": f"{AVRO_NAMESPACE}__DELETIONS_VECTORS_RANGES",
            "fields": [{"name": "f0", "type": "string"}, {"name": "f1", "type": "int"},
                       {"name": "f2", "type": "int"},
                       {"name": "_CARDINALITY", "type": ["null", "long"], "default": None}]}}]},
        {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
        {"name": "_GLOBAL_INDEX", "default": None, "type": ["null", {
            "type": "record", "name": f"{AVRO_NAMESPACE}__GLOBAL_INDEX",
            "fields": [{"name": "_ROW_RANGE_START", "type": "long"}, {"name": "_ROW_RANGE_END", "type": "long"},
                       {"name": "_INDEX_FIELD_ID", "type": "int"},
                       {"name": "_EXTRA_FIELD_IDS", "type": ["null", {"type": "array", "items": "int"}],
                        "default": None},
                       {"name": "_INDEX_META", "type": ["null", "bytes"], "default": None},
                       {"name": "_SOURCE_META", "type": ["null", "bytes"], "default": None}]}]},
    ],
})


@dataclass(frozen=True)
class IndexEntry:
    """One index file of a snapshot; `record` is the Avro record, kept whole for index types not handled here."""

    partition: bytes
    bucket: int
    index_type: str
    file_name: str
    record: Mapping[str, Any] = field(compare=False)

    @property
    def ranges(self) -> dict[str, VectorRange]:
        return {r["f0"]: VectorRange(r["f0"], r["f1"], r["f2"], r.get("_CARDINALITY"))
                for r in self.record.get("_DELETIONS_VECTORS_RANGES") or ()}

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> "IndexEntry":
        return cls(rec["_PARTITION"], rec["_BUCKET"], rec["_INDEX_TYPE"], rec["_FILE_NAME"], dict(rec))

    @classmethod
    def deletion_vectors(cls, partition: bytes, bucket: int, file_name: str, file_size: int,
                         ranges: Sequence[VectorRange]) -> "IndexEntry":
        rec = {"_VERSION": 1, "_KIND": ADD, "_PARTITION": partition, "_BUCKET": bucket, "_INDEX_TYPE": INDEX_TYPE,
               "_FILE_NAME": file_name, "_FILE_SIZE": file_size, "_ROW_COUNT": len(ranges),
               "_DELETIONS_VECTORS_RANGES": [{"f0": r.data_file, "f1": r.offset, "f2": r.length,
                                              "_CARDINALITY": r.cardinality} for r in ranges],
               "_EXTERNAL_PATH": None, "_GLOBAL_INDEX": None}
        return cls(partition, bucket, INDEX_TYPE, file_name, rec)

    def to_dict(self) -> dict[str, Any]:
        rec = dict(self.record)
        rec["_PARTITION"] = self.partition.hex()
        return rec

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "IndexEntry":
        rec = dict(d)
        rec["_PARTITION"] = bytes.fromhex(rec["_PARTITION"])
        return cls.from_avro(rec)


def read_index_manifest(table: "Table", name: str) -> list[IndexEntry]:
    """The live entries of an index manifest (ADD entries; a DELETE entry, if a writer left one, removes one)."""
    live: dict[str, IndexEntry] = {}
    for rec in table.manifest_io.read_records(name, "index manifest"):
        entry = IndexEntry.from_avro(rec)
        if rec.get("_KIND", ADD) == DELETE:
            live.pop(entry.file_name, None)
        else:
            live[entry.file_name] = entry
    return list(live.values())


def write_index_manifest(table: "Table", entries: Iterable[IndexEntry]) -> str:
    name = f"index-manifest-{uuid.uuid4()}-0"
    buf = _io.BytesIO()
    records = [{**e.record, "_KIND": ADD} for e in entries]
    fastavro.writer(buf, INDEX_MANIFEST_SCHEMA, records, codec=table.manifest_io.codec)
    table.manifest_io.io.write_bytes(table.manifest_io.path(name), buf.getvalue())
    return name


def combine_index(table: "Table", previous: str | None, adds: Sequence[IndexEntry],
                  deletes: Sequence[str]) -> str | None:
    """The index manifest of a commit: `previous` (the latest snapshot's) without the index files `deletes` names,
    plus `adds`. CommitConflictError when a deleted file is gone or a bucket would get a second deletion-vector
    file: a concurrent commit changed the same bucket's vectors, and this commit's were computed without it."""
    if not adds and not deletes:
        return previous
    entries = read_index_manifest(table, previous) if previous else []
    names = {e.file_name for e in entries}
    gone = [n for n in deletes if n not in names]
    if gone:
        raise CommitConflictError(f"the deletion-vector index file(s) {gone} this commit replaces were replaced by "
                                  "a concurrent commit")
    kept = [e for e in entries if e.file_name not in set(deletes)]
    owned = {(e.partition, e.bucket) for e in kept if e.index_type == INDEX_TYPE}
    for a in adds:
        if a.index_type == INDEX_TYPE and (a.partition, a.bucket) in owned:
            raise CommitConflictError(f"the deletion vectors of bucket {a.bucket} were changed by a concurrent "
                                      "commit")
    out = kept + list(adds)
    return write_index_manifest(table, out) if out else None


def index_directory(table: "Table", partition: bytes, bucket: int) -> str:
    """Where a bucket's new index files go: `index/`, or the bucket folder with `index-file-in-data-file-dir`."""
    if option_boolean(table.options().get("index-file-in-data-file-dir", "false"), "index-file-in-data-file-dir"):
        return table.bucket_dir(table.partition_codec.from_bytes(partition), bucket)
    return f"{table.path}/index"


def index_file_path(table: "Table", entry: IndexEntry) -> str:
    external = entry.record.get("_EXTERNAL_PATH")
    if external:
        return str(external)
    return f"{index_directory(table, entry.partition, entry.bucket)}/{entry.file_name}"


class DeletionVectors:
    """The deletion vectors of one snapshot, read per bucket when first asked for.

    A primary-key or bucketed append table has one index file per bucket; an unaware-bucket append table (Paimon's
    AppendDeleteFileMaintainer) may have several per partition, all of bucket 0, each holding the vectors of some
    of its data files: every one of them counts."""

    def __init__(self, table: "Table", index_manifest: str | None):
        self.table = table
        self.index_manifest = index_manifest
        self.entries: dict[tuple[bytes, int], IndexEntry] = {}
        self._all: dict[tuple[bytes, int], list[IndexEntry]] = {}
        if index_manifest:
            for e in read_index_manifest(table, index_manifest):
                if e.index_type == INDEX_TYPE:
                    self.entries[(e.partition, e.bucket)] = e
                    self._all.setdefault((e.partition, e.bucket), []).append(e)
        self._read: dict[tuple[bytes, int], dict[str, np.ndarray]] = {}

    @classmethod
    def of(cls, table: "Table", snapshot: "Snapshot | None") -> "DeletionVectors":
        return cls(table, snapshot.index_manifest if snapshot is not None else None)

    def entry(self, partition: bytes, bucket: int) -> IndexEntry | None:
        """The bucket's index file (the last one listed, where a writer keeps one per bucket)."""
        return self.entries.get((partition, bucket))

    def entries_of(self, partition: bytes, bucket: int) -> list[IndexEntry]:
        """Every deletion-vector index file of the bucket (an unaware-bucket append table may have several)."""
        return list(self._all.get((partition, bucket), []))

    def bucket(self, partition: bytes, bucket: int) -> dict[str, np.ndarray]:
        """Data file name -> deleted positions, for every vector of the bucket."""
        key = (partition, bucket)
        got = self._read.get(key)
        if got is None:
            got = {}
            for e in self._all.get(key, []):
                got.update(read_vectors(self.table.io, index_file_path(self.table, e), e.ranges))
            self._read[key] = got
        return got

    def deletion_files(self, partition: bytes, bucket: int, names: set[str]) -> dict[str, list]:
        """Data file name -> [index file path, offset, length] of the vector of each of `names` that has one."""
        return {name: [index_file_path(self.table, e), r.offset, r.length]
                for e in self._all.get((partition, bucket), []) for name, r in e.ranges.items() if name in names}
