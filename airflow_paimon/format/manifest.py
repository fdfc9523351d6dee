"""Manifest lists and manifest files: Paimon's Avro metadata that says which data files a snapshot holds.

A snapshot names two manifest lists (base: the table before the commit; delta: what the commit changed). Each
list holds `ManifestFileMeta` records; each manifest file holds `ManifestEntry` records that ADD or DELETE a data
file in a (partition, bucket). Record and field names follow Paimon's Java Avro schemas, so Java Paimon,
pypaimon and this library read each other's manifests.
"""

from __future__ import annotations

import io
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import fastavro

from .errors import CorruptFileError
from .fileio import FileIO

if TYPE_CHECKING:
    from .snapshot import Snapshot

ADD, DELETE = 0, 1
# The namespace of the record names in the Avro schemas Paimon writes (manifests, index manifests).
AVRO_NAMESPACE = "org.apache.paimon.avro.generated.record"


def _stats_schema(name: str) -> dict:
    return {
        "type": "record",
        "name": name,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}],
             "default": None},
        ],
    }


def _opt(name: str, avro_type: Any) -> dict:
    return {"name": name, "type": ["null", avro_type], "default": None}


_STRINGS = {"type": "array", "items": "string"}

DATA_FILE_SCHEMA = {
    "type": "record",
    "name": f"{AVRO_NAMESPACE}__FILE",
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": _stats_schema(f"{AVRO_NAMESPACE}__FILE__KEY_STATS")},
        {"name": "_VALUE_STATS", "type": _stats_schema(f"{AVRO_NAMESPACE}__FILE__VALUE_STATS")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": _STRINGS},
        _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
        _opt("_DELETE_ROW_COUNT", "long"),
        _opt("_EMBEDDED_FILE_INDEX", "bytes"),
        _opt("_FILE_SOURCE", "int"),
        _opt("_VALUE_STATS_COLS", _STRINGS),
        _opt("_EXTERNAL_PATH", "string"),
        _opt("_FIRST_ROW_ID", "long"),
        _opt("_WRITE_COLS", _STRINGS),
    ],
}

MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": AVRO_NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {"name": "_FILE", "type": DATA_FILE_SCHEMA},
    ],
})

MANIFEST_FILE_META_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": AVRO_NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": _stats_schema(f"{AVRO_NAMESPACE}__PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"},
        _opt("_MIN_BUCKET", "int"),
        _opt("_MAX_BUCKET", "int"),
        _opt("_MIN_LEVEL", "int"),
        _opt("_MAX_LEVEL", "int"),
        _opt("_MIN_ROW_ID", "long"),
        _opt("_MAX_ROW_ID", "long"),
    ],
})

FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT = 0, 1


@dataclass(frozen=True)
class SimpleStats:
    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...] | None

    def to_avro(self) -> dict:
        return {
            "_MIN_VALUES": self.min_values,
            "_MAX_VALUES": self.max_values,
            "_NULL_COUNTS": list(self.null_counts) if self.null_counts is not None else None,
        }

    @classmethod
    def from_avro(cls, rec: dict) -> "SimpleStats":
        nulls = rec.get("_NULL_COUNTS")
        return cls(rec["_MIN_VALUES"], rec["_MAX_VALUES"], tuple(nulls) if nulls is not None else None)


@dataclass(frozen=True)
class DataFileMeta:
    """One data file; serialisable (to_dict/from_dict) so writers in other processes can hand it back."""

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time_ms: int | None = None
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: int | None = None
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None

    @property
    def add_row_count(self) -> int:
        return self.row_count - (self.delete_row_count or 0)

    def to_avro(self) -> dict:
        ct = self.creation_time_ms
        return {
            "_FILE_NAME": self.file_name,
            "_FILE_SIZE": self.file_size,
            "_ROW_COUNT": self.row_count,
            "_MIN_KEY": self.min_key,
            "_MAX_KEY": self.max_key,
            "_KEY_STATS": self.key_stats.to_avro(),
            "_VALUE_STATS": self.value_stats.to_avro(),
            "_MIN_SEQUENCE_NUMBER": self.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": self.max_sequence_number,
            "_SCHEMA_ID": self.schema_id,
            "_LEVEL": self.level,
            "_EXTRA_FILES": list(self.extra_files),
            "_CREATION_TIME": datetime.fromtimestamp(ct / 1000, tz=timezone.utc) if ct is not None else None,
            "_DELETE_ROW_COUNT": self.delete_row_count,
            "_EMBEDDED_FILE_INDEX": self.embedded_index,
            "_FILE_SOURCE": self.file_source,
            "_VALUE_STATS_COLS": list(self.value_stats_cols) if self.value_stats_cols is not None else None,
            "_EXTERNAL_PATH": self.external_path,
            "_FIRST_ROW_ID": self.first_row_id,
            "_WRITE_COLS": list(self.write_cols) if self.write_cols is not None else None,
        }

    @classmethod
    def from_avro(cls, rec: dict) -> "DataFileMeta":
        ct = rec.get("_CREATION_TIME")
        ct_ms: int | None
        if isinstance(ct, datetime):
            ct_ms = int(ct.timestamp() * 1000) if ct.tzinfo else int(ct.replace(tzinfo=timezone.utc).timestamp() * 1000)
        else:
            ct_ms = ct
        cols = rec.get("_VALUE_STATS_COLS")
        write_cols = rec.get("_WRITE_COLS")
        return cls(
            file_name=rec["_FILE_NAME"],
            file_size=rec["_FILE_SIZE"],
            row_count=rec["_ROW_COUNT"],
            min_key=rec["_MIN_KEY"],
            max_key=rec["_MAX_KEY"],
            key_stats=SimpleStats.from_avro(rec["_KEY_STATS"]),
            value_stats=SimpleStats.from_avro(rec["_VALUE_STATS"]),
            min_sequence_number=rec["_MIN_SEQUENCE_NUMBER"],
            max_sequence_number=rec["_MAX_SEQUENCE_NUMBER"],
            schema_id=rec["_SCHEMA_ID"],
            level=rec["_LEVEL"],
            extra_files=tuple(rec.get("_EXTRA_FILES") or ()),
            creation_time_ms=ct_ms,
            delete_row_count=rec.get("_DELETE_ROW_COUNT"),
            embedded_index=rec.get("_EMBEDDED_FILE_INDEX"),
            file_source=rec.get("_FILE_SOURCE"),
            value_stats_cols=tuple(cols) if cols is not None else None,
            external_path=rec.get("_EXTERNAL_PATH"),
            first_row_id=rec.get("_FIRST_ROW_ID"),
            write_cols=tuple(write_cols) if write_cols is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("min_key", "max_key", "embedded_index"):
            if d[k] is not None:
                d[k] = d[k].hex()
        for k in ("key_stats", "value_stats"):
            d[k]["min_values"] = d[k]["min_values"].hex()
            d[k]["max_values"] = d[k]["max_values"].hex()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DataFileMeta":
        d = dict(d)
        for k in ("min_key", "max_key", "embedded_index"):
            if d.get(k) is not None:
                d[k] = bytes.fromhex(d[k])
        for k in ("key_stats", "value_stats"):
            s = d[k]
            nulls = s.get("null_counts")
            d[k] = SimpleStats(bytes.fromhex(s["min_values"]), bytes.fromhex(s["max_values"]),
                               tuple(nulls) if nulls is not None else None)
        for k in ("extra_files", "value_stats_cols", "write_cols"):
            if d.get(k) is not None:
                d[k] = tuple(d[k])
        return cls(**d)


@dataclass(frozen=True)
class ManifestEntry:
    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> tuple:
        return (self.partition, self.bucket, self.file.level, self.file.file_name)

    def to_avro(self) -> dict:
        return {
            "_VERSION": 2,
            "_KIND": self.kind,
            "_PARTITION": self.partition,
            "_BUCKET": self.bucket,
            "_TOTAL_BUCKETS": self.total_buckets,
            "_FILE": self.file.to_avro(),
        }

    @classmethod
    def from_avro(cls, rec: dict) -> "ManifestEntry":
        return cls(rec["_KIND"], rec["_PARTITION"], rec["_BUCKET"], rec["_TOTAL_BUCKETS"],
                   DataFileMeta.from_avro(rec["_FILE"]))


@dataclass(frozen=True)
class ManifestFileMeta:
    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None

    def to_avro(self) -> dict:
        return {
            "_VERSION": 2,
            "_FILE_NAME": self.file_name,
            "_FILE_SIZE": self.file_size,
            "_NUM_ADDED_FILES": self.num_added_files,
            "_NUM_DELETED_FILES": self.num_deleted_files,
            "_PARTITION_STATS": self.partition_stats.to_avro(),
            "_SCHEMA_ID": self.schema_id,
            "_MIN_BUCKET": self.min_bucket,
            "_MAX_BUCKET": self.max_bucket,
            "_MIN_LEVEL": self.min_level,
            "_MAX_LEVEL": self.max_level,
            "_MIN_ROW_ID": self.min_row_id,
            "_MAX_ROW_ID": self.max_row_id,
        }

    @classmethod
    def from_avro(cls, rec: dict) -> "ManifestFileMeta":
        return cls(
            file_name=rec["_FILE_NAME"],
            file_size=rec["_FILE_SIZE"],
            num_added_files=rec["_NUM_ADDED_FILES"],
            num_deleted_files=rec["_NUM_DELETED_FILES"],
            partition_stats=SimpleStats.from_avro(rec["_PARTITION_STATS"]),
            schema_id=rec["_SCHEMA_ID"],
            min_bucket=rec.get("_MIN_BUCKET"),
            max_bucket=rec.get("_MAX_BUCKET"),
            min_level=rec.get("_MIN_LEVEL"),
            max_level=rec.get("_MAX_LEVEL"),
            min_row_id=rec.get("_MIN_ROW_ID"),
            max_row_id=rec.get("_MAX_ROW_ID"),
        )


def _avro_bytes(schema: Any, records: Iterable[dict], codec: str) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec=codec)
    return buf.getvalue()


def avro_codec(compression: str) -> str:
    return {"zstd": "zstandard", "snappy": "snappy", "gzip": "deflate", "deflate": "deflate",
            "none": "null", "null": "null"}.get(compression, "zstandard")


LISTS_KEPT = 16
"""Manifest lists a `ManifestIO` keeps once read (a snapshot has three)."""


class ManifestIO:
    """Reads and writes the manifest directory of one table; manifests are immutable once written."""

    def __init__(self, io_: FileIO, table_path: str, compression: str = "zstd"):
        self.io = io_
        self.dir = f"{table_path}/manifest"
        self.codec = avro_codec(compression)
        self._prefix = uuid.uuid4()
        self._counter = 0
        # Manifest lists read, by name (a name is never reused, a list never changes): a write reads its base's
        # lists and its commit reads the latest's, the same ones unless another writer committed in between. On
        # an object store each is a request saved.
        self._lists: dict[str, tuple[ManifestFileMeta, ...]] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_lists": {}}

    def path(self, name: str) -> str:
        return f"{self.dir}/{name}"

    def _new_name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._prefix}-{self._counter}"

    # ---- manifest files --------------------------------------------------------------------------
    def read_records(self, file_name: str, kind: str = "manifest file") -> list[dict]:
        """The raw records of one Avro file under `manifest/`; CorruptFileError naming the file when damaged."""
        path = self.path(file_name)
        data = self.io.read_bytes(path)
        try:
            records = []
            for record in fastavro.reader(io.BytesIO(data)):
                if not isinstance(record, dict):
                    raise TypeError(f"a top-level {type(record).__name__} where Avro records belong")
                records.append(record)
            return records
        except (ValueError, KeyError, TypeError, IndexError, EOFError, StopIteration, AssertionError) as e:
            reason = "empty" if not data else f"{len(data)} bytes, " + (str(e).splitlines()[0] if str(e)
                                                                     else type(e).__name__)
            raise CorruptFileError(f"{kind} {path} is truncated or not a Paimon Avro file ({reason}); restore it "
                                   "from a backup: every snapshot and tag that lists it cannot be read") from None

    def read_entries(self, file_name: str) -> list[ManifestEntry]:
        return [ManifestEntry.from_avro(r) for r in self.read_records(file_name)]

    def write_entries(self, entries: Sequence[ManifestEntry], schema_id: int,
                      partition_stats: SimpleStats) -> ManifestFileMeta:
        name = self._new_name("manifest")
        data = _avro_bytes(MANIFEST_ENTRY_SCHEMA, (e.to_avro() for e in entries), self.codec)
        self.io.write_bytes(self.path(name), data)
        buckets = [e.bucket for e in entries]
        levels = [e.file.level for e in entries]
        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added_files=sum(1 for e in entries if e.kind == ADD),
            num_deleted_files=sum(1 for e in entries if e.kind == DELETE),
            partition_stats=partition_stats,
            schema_id=schema_id,
            min_bucket=min(buckets) if buckets else None,
            max_bucket=max(buckets) if buckets else None,
            min_level=min(levels) if levels else None,
            max_level=max(levels) if levels else None,
        )

    # ---- manifest lists --------------------------------------------------------------------------
    def read_list(self, list_name: str) -> list[ManifestFileMeta]:
        metas = self._lists.get(list_name)
        if metas is None:
            metas = tuple(ManifestFileMeta.from_avro(r) for r in self.read_records(list_name, "manifest list"))
            if len(self._lists) >= LISTS_KEPT:
                self._lists = {}   # (a new dict, not one emptied under a thread reading it)
            self._lists[list_name] = metas
        return list(metas)

    def changelog_entries(self, snapshot: "Snapshot") -> list[ManifestEntry]:
        """The changelog files `snapshot` produced (ADD entries read through its `changelogManifestList`), in
        the order they were committed; empty when it produced none."""
        if not snapshot.changelog_manifest_list:
            return []
        out: list[ManifestEntry] = []
        for meta in self.read_list(snapshot.changelog_manifest_list):
            out.extend(self.read_entries(meta.file_name))
        return out

    def write_list(self, metas: Sequence[ManifestFileMeta]) -> tuple[str, int]:
        name = self._new_name("manifest-list")
        data = _avro_bytes(MANIFEST_FILE_META_SCHEMA, (m.to_avro() for m in metas), self.codec)
        self.io.write_bytes(self.path(name), data)
        return name, len(data)


def merge_entries(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """Apply ADD/DELETE entries in order; what remains are the live ADDs (order of first appearance)."""
    live: dict[tuple, ManifestEntry] = {}
    for e in entries:
        if e.kind == ADD:
            live[e.identifier] = e
        else:
            live.pop(e.identifier, None)
    return list(live.values())

