"""Read planning: which data files of a snapshot a read needs, grouped into serialisable splits.

Pruning uses pyarrow's own expression simplification: each file becomes a dataset fragment whose "partition
expression" states what is known about all its rows (partition values; key ranges; for append tables, column
ranges from the manifest statistics), and `get_fragments(filter=...)` drops fragments the filter cannot match.
Value statistics never prune files of primary-key tables: an older version of a row may not match while the
newest does, so only partition and key ranges are safe there. Statistics describe the columns of the schema a
file was written with; they are decoded with that schema and carried to the current columns by field id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .binary_row import deserialize_row
from .deletion_vectors_index import DeletionVectors
from .evolution import monotonic_cast
from .manifest import DataFileMeta, ManifestEntry, SimpleStats
from .schema import TableSchema
from .snapshot import Snapshot

if TYPE_CHECKING:
    import pyarrow.dataset as ds

    from .table import Table

DECODED_PER_FILE_BYTE = 4
"""How many times larger rows are in memory than in their compressed Parquet file: an estimate for memory budgets."""

_RANGE_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_date, pa.types.is_timestamp,
                pa.types.is_decimal)


@dataclass
class Split:
    """The live files of one (partition, bucket) in a snapshot; picklable and JSON-able."""

    partition: tuple
    partition_bytes: bytes
    bucket: int
    files: list[DataFileMeta] = field(default_factory=list)
    snapshot_id: int | None = None
    # Deletion-vector tables: data file name -> [index file path, offset, length] of its vector (Paimon's
    # DeletionFile); None for tables without deletion vectors.
    deletion_files: dict[str, list] | None = None

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"partition_bytes": self.partition_bytes.hex(), "bucket": self.bucket,
                "files": [f.to_dict() for f in self.files], "snapshot_id": self.snapshot_id,
                "deletion_files": self.deletion_files}

    @classmethod
    def from_dict(cls, d: dict[str, Any], table: "Table") -> "Split":
        pb = bytes.fromhex(d["partition_bytes"])
        return cls(table.partition_codec.from_bytes(pb), pb, d["bucket"],
                   [DataFileMeta.from_dict(f) for f in d["files"]], d.get("snapshot_id"), d.get("deletion_files"))


def _rangeable(t: pa.DataType) -> bool:
    return any(check(t) for check in _RANGE_TYPES)


def _range_expr(name: str, t: pa.DataType, lo: Any, hi: Any) -> ds.Expression | None:
    if lo is None or hi is None or not _rangeable(t):
        return None
    import pyarrow.dataset as ds  # imported when a filter is planned: it loads pandas

    f = ds.field(name)
    try:
        return (f >= pa.scalar(lo, type=t)) & (f <= pa.scalar(hi, type=t))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


def _cast_bound(value: Any, source: pa.DataType, target: pa.DataType) -> Any:
    """A statistics bound in the current type; None (no bound) when it does not convert exactly."""
    if value is None:
        return None
    try:
        return pa.scalar(value, type=source).cast(target, safe=True).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return None


def _and(parts: list[ds.Expression]) -> ds.Expression:
    import pyarrow.dataset as ds

    out = ds.scalar(True)
    for p in parts:
        out = out & p
    return out


def _snapshot_by_id(table: "Table", snapshot_id: int | None) -> Snapshot | None:
    """The snapshot of a plan given by id: its file, or a tag's copy once the snapshot expired."""
    if snapshot_id is None:
        return None
    if table.snapshot_manager.exists(snapshot_id):
        return table.snapshot(snapshot_id)
    return next((t.snapshot for t in table.tags.list() if t.snapshot.id == snapshot_id), None)


def vector_split(vectors: DeletionVectors | None, partition: tuple, partition_bytes: bytes, bucket: int,
                 files: list[DataFileMeta]) -> Split:
    """A split of some of a bucket's files with their deletion vectors in `vectors` (None: a table without
    them): what a writer reads of the files it looks into."""
    names = {f.file_name for f in files}
    deletion_files = None if vectors is None else vectors.deletion_files(partition_bytes, bucket, names)
    return Split(partition, partition_bytes, bucket, files, deletion_files=deletion_files or None)


def attach_deletion_files(table: "Table", splits: list[Split], snapshot: Snapshot | None) -> None:
    """Give each split the vectors of its files in `snapshot` (none: an empty map)."""
    vectors = DeletionVectors.of(table, snapshot)
    for s in splits:
        s.deletion_files = vectors.deletion_files(s.partition_bytes, s.bucket, {f.file_name for f in s.files})


class ScanPlanner:
    def __init__(self, table: "Table"):
        table.require_readable()
        self.table = table
        self.schema = table.schema()

    def _partition_expr(self, values: tuple) -> list[ds.Expression]:
        import pyarrow.dataset as ds

        out = []
        for name, v in zip(self.schema.partition_keys, values):
            t = self.schema.arrow_type(name)
            out.append(ds.field(name).is_null() if v is None else ds.field(name) == pa.scalar(v, type=t))
        return out

    def _file_guarantee(self, meta: DataFileMeta) -> list[ds.Expression]:
        """What the file's statistics prove about all its rows, in current column names.

        Statistics describe the columns of the schema the file was written with: they are decoded with that
        schema's names and types and carried over to the current columns by field id; a column whose type
        changed since keeps its bounds only when the cast keeps the order of values. Columns added after the
        file was written are NULL in all its rows.
        """
        written = self.table.schema_by_id(meta.schema_id)
        if self.table.is_primary_key:
            if not meta.key_stats.min_values:
                return []
            return self._ranges(written, written.trimmed_primary_keys, meta.key_stats)
        if not meta.value_stats.min_values:
            return []
        names = list(meta.value_stats_cols) if meta.value_stats_cols is not None else written.field_names
        out = self._ranges(written, names, meta.value_stats)
        if written.id != self.schema.id:
            import pyarrow.dataset as ds

            old_ids = {f.id for f in written.fields}
            out += [ds.field(f.name).is_null() for f in self.schema.fields if f.id not in old_ids]
        return out

    def _ranges(self, written: TableSchema, names: list[str], stats: SimpleStats) -> list[ds.Expression]:
        try:
            old_types = [written.arrow_type(n) for n in names]
            mins = deserialize_row(stats.min_values, old_types)
            maxs = deserialize_row(stats.max_values, old_types)
        except Exception:  # stats of an unexpected shape: do not prune with them
            return []
        current = {f.id: f.name for f in self.schema.fields}
        out = []
        for n, old_type, lo, hi in zip(names, old_types, mins, maxs):
            name = current.get(written.field(n).id)
            if name is None:
                continue
            t = self.schema.arrow_type(name)
            if t != old_type:
                if not monotonic_cast(old_type, t):
                    continue
                lo, hi = _cast_bound(lo, old_type, t), _cast_bound(hi, old_type, t)
            e = _range_expr(name, t, lo, hi)
            if e is not None:
                out.append(e)
        return out

    def plan(self, entries: list[ManifestEntry], filter: ds.Expression | None,
             snapshot_id: int | None, snapshot: Snapshot | None = None) -> list[Split]:
        """Splits of `entries` (the files of the snapshot `snapshot_id`; on a deletion-vector table the splits
        carry the vectors of `snapshot`, found by id when not given)."""
        groups: dict[tuple[bytes, int], Split] = {}
        codec = self.table.partition_codec
        decoded: dict[bytes, tuple] = {}
        for e in entries:
            key = (e.partition, e.bucket)
            split = groups.get(key)
            if split is None:
                values = decoded.get(e.partition)
                if values is None:
                    values = decoded[e.partition] = codec.from_bytes(e.partition)
                split = groups[key] = Split(values, e.partition, e.bucket, [], snapshot_id)
            split.files.append(e.file)
        splits = list(groups.values())
        if filter is not None:
            # A column with a default value reads otherwise than its files' statistics say: no pruning by it.
            text = str(filter)
            if not any(name in text for name in self.table.core_options.field_default_values):
                splits = self._prune(splits, filter)
        for s in splits:
            s.files.sort(key=lambda f: (-f.level, f.max_sequence_number, f.min_sequence_number))
        if self.table.core_options.deletion_vectors and splits:
            attach_deletion_files(self.table, splits, snapshot or _snapshot_by_id(self.table, snapshot_id))
        return splits

    def _prune(self, splits: list[Split], filter: ds.Expression) -> list[Split]:
        import pyarrow.dataset as ds

        fmt = ds.ParquetFileFormat()
        fs = self.table.io.fs
        fragments = []
        owners: list[tuple[Split, DataFileMeta]] = []
        for s in splits:
            pexpr = self._partition_expr(s.partition)
            for i, f in enumerate(s.files):
                guarantee = _and(pexpr + self._file_guarantee(f))
                fragments.append(fmt.make_fragment(f"/prune/{len(owners)}", fs, partition_expression=guarantee))
                owners.append((s, f))
        if not fragments:
            return splits
        dataset = ds.FileSystemDataset(fragments, self.schema.logical_arrow_schema(), fmt, fs)
        keep_ids = {int(fr.path.rsplit("/", 1)[1]) for fr in dataset.get_fragments(filter=filter)}
        kept: dict[int, Split] = {}
        for i, (s, f) in enumerate(owners):
            if i in keep_ids:
                target = kept.get(id(s))
                if target is None:
                    target = kept[id(s)] = Split(s.partition, s.partition_bytes, s.bucket, [], s.snapshot_id)
                target.files.append(f)
        return list(kept.values())
