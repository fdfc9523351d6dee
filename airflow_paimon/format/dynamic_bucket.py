"""Bucket assignment of dynamic-bucket primary-key tables (`bucket = -1`), as Paimon's HashBucketAssigner does it.

Each partition's HASH index files (hash_index.py) say which key hashes live in which bucket. A key whose hash is
there goes back to that bucket, whatever the write; a new hash fills the partition's buckets that hold fewer than
`dynamic-bucket.target-row-num` hashes (lowest bucket first), then opens the lowest free bucket id; past
`dynamic-bucket.max-buckets` it goes to one of the partition's buckets at random (PartitionIndex.assign). This is
one assigner, as Paimon with an assigner parallelism of 1 (batch writes): the writer owns every bucket.

Every written row adds its key's hash to its bucket's index, deletes included (DynamicBucketIndexMaintainer), so a
deleted key that comes back returns to its old bucket. A bucket whose hashes grew gets a new index file holding
all of them; the commit replaces the bucket's previous file in the index manifest with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .bucketing import hash_codes
from .deletion_vectors_index import IndexEntry, read_index_manifest
from .errors import InvalidOptionError
from .hash_index import HASH_INDEX, read_hashes, write_hashes

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .table import Table

# Paimon stores bucket ids of dynamic tables as Java shorts.
MAX_DYNAMIC_BUCKETS = 32767


@dataclass
class PartitionHashIndex:
    """One partition's buckets and their key hashes, as the snapshot's index files hold them, plus the hashes this
    write adds."""

    existing: dict[int, np.ndarray]
    added: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def lookup(self, with_added: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(sorted hashes, their buckets) of every bucket (with the hashes this write added: `with_added`)."""
        parts = [(b, h) for b, h in self.existing.items()]
        if with_added:
            parts += [(b, h) for b, added in self.added.items() for h in added]
        if not parts:
            return np.empty(0, np.int32), np.empty(0, np.int32)
        hashes = np.concatenate([h for _, h in parts])
        buckets = np.concatenate([np.full(len(h), b, np.int32) for b, h in parts])
        order = np.argsort(hashes, kind="stable")
        return hashes[order], buckets[order]


def key_hashes(table: "Table", data: pa.Table) -> np.ndarray:
    """The hash of each row's primary key without the partition keys: what the HASH index holds."""
    return hash_codes(data.select(table.schema().trimmed_primary_keys))


def partition_rows(table: "Table", data: pa.Table) -> list[tuple[bytes, np.ndarray]]:
    """(serialised partition, indices of its rows) of each partition `data` holds (partition columns typed as
    the table's)."""
    pkeys = table.schema().partition_keys
    if not pkeys:
        return [(table.partition_codec.to_bytes(()), np.arange(data.num_rows))]
    parts = data.select(pkeys)
    codes = np.zeros(data.num_rows, np.int64)
    for column in parts.columns:
        # The stubs type dictionary_encode as returning its argument's type; it returns a dictionary array.
        enc = cast(pa.DictionaryArray, pc.dictionary_encode(column).combine_chunks())
        codes = codes * (len(enc.dictionary) + 1) + enc.indices.fill_null(len(enc.dictionary)).to_numpy(
            zero_copy_only=False)
    out = []
    for code in np.unique(codes).tolist():
        rows = np.flatnonzero(codes == code)
        values = tuple(c[int(rows[0])].as_py() for c in parts.columns)
        out.append((table.partition_codec.to_bytes(values), rows))
    return out


def find_buckets(known: np.ndarray, buckets: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """The bucket of each hash among `known` (sorted) with its `buckets`; -1 where it is not there."""
    out = np.full(len(hashes), -1, np.int32)
    pos = np.searchsorted(known, hashes)
    found = pos < len(known)
    found[found] = known[pos[found]] == hashes[found]
    out[found] = buckets[pos[found]]
    return out


class KnownBuckets:
    """The buckets a write assigned to its keys, by (partition, key hash): small enough to ship to the tasks of
    another process, which then bucket the same rows exactly as the one sequential assignment did."""

    def __init__(self, table: "Table", keys: pa.Table, buckets: np.ndarray):
        self.table = table
        hashes = key_hashes(table, keys)
        self._lookup: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        for partition, rows in partition_rows(table, keys):
            unique, first = np.unique(hashes[rows], return_index=True)
            self._lookup[partition] = (unique, buckets[rows][first])

    def buckets(self, data: pa.Table) -> np.ndarray:
        """The bucket of each row of `data` (partition and primary-key columns typed as the table's); -1 for a
        key the write did not assign."""
        hashes = key_hashes(self.table, data)
        out = np.full(data.num_rows, -1, np.int32)
        empty = (np.empty(0, np.int32), np.empty(0, np.int32))
        for partition, rows in partition_rows(self.table, data):
            out[rows] = find_buckets(*self._lookup.get(partition, empty), hashes[rows])
        return out


class DynamicBucketAssigner:
    """Assigns buckets against one snapshot's HASH index and writes the index files of the buckets that grew."""

    def __init__(self, table: "Table", snapshot: "Snapshot | None"):
        self.table = table
        options = table.core_options
        self.target = options.dynamic_bucket_target_row_num
        self.max_buckets = options.dynamic_bucket_max_buckets
        self._files: dict[bytes, dict[int, IndexEntry]] = {}
        name = snapshot.index_manifest if snapshot is not None else None
        for e in read_index_manifest(table, name) if name else []:
            if e.index_type == HASH_INDEX:
                self._files.setdefault(e.partition, {})[e.bucket] = e
        self._partitions: dict[bytes, PartitionHashIndex] = {}
        # Sorted lookups of lookup_rows, kept across calls (a Spark task looks up batch after batch).
        self._sorted: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def _index(self, partition: bytes) -> PartitionHashIndex:
        got = self._partitions.get(partition)
        if got is None:
            files = self._files.get(partition, {})
            existing = {b: read_hashes(self.table, f) for b, f in sorted(files.items())}
            got = self._partitions[partition] = PartitionHashIndex(existing)
        return got

    def assign_rows(self, data: pa.Table) -> np.ndarray:
        """The bucket of each row of `data` (it holds the partition and primary-key columns, typed as the
        table's): per partition, as the HASH index assigns its key hash."""
        hashes = key_hashes(self.table, data)
        out = np.empty(data.num_rows, np.int32)
        for partition, rows in partition_rows(self.table, data):
            out[rows] = self.assign(partition, hashes[rows])
        return out

    def lookup_rows(self, data: pa.Table) -> np.ndarray:
        """The bucket the snapshot's HASH index (and this assigner's assignments) gives each row's key; -1 for a
        key no bucket of its partition holds, which then has no row in the table. Places nothing."""
        hashes = key_hashes(self.table, data)
        out = np.empty(data.num_rows, np.int32)
        for partition, rows in partition_rows(self.table, data):
            found = self._sorted.get(partition)
            if found is None:
                found = self._sorted[partition] = self._index(partition).lookup(with_added=True)
            out[rows] = find_buckets(*found, hashes[rows])
        return out

    def assign(self, partition: bytes, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each row (by its key hash) in `partition`; new hashes are recorded for `index_files`."""
        index = self._index(partition)
        out = find_buckets(*index.lookup(with_added=True), hashes)
        new = out < 0
        if new.any():
            # New hashes in the order they first come, as Paimon's assigner sees records.
            uniq, first, inverse = np.unique(hashes[new], return_index=True, return_inverse=True)
            arrival = np.argsort(first, kind="stable")
            placed = np.empty(len(uniq), np.int32)
            placed[arrival] = self._place(index, len(uniq))
            out[new] = placed[inverse]
            for b in np.unique(placed).tolist():
                index.added.setdefault(b, []).append(uniq[placed == b])
            self._sorted.pop(partition, None)
        return out

    def _place(self, index: PartitionHashIndex, n: int) -> np.ndarray:
        """Buckets for `n` new hashes in arrival order: fill non-full buckets (lowest id first) up to the target,
        then new buckets (lowest free ids) of the target size, then, past max-buckets, random existing ones."""
        counts = {b: len(h) for b, h in index.existing.items()}
        for b, parts in index.added.items():
            counts[b] = counts.get(b, 0) + sum(len(p) for p in parts)
        slots = [(b, self.target - c) for b, c in sorted(counts.items()) if c < self.target]
        limit = MAX_DYNAMIC_BUCKETS if self.max_buckets == -1 else self.max_buckets
        room = sum(c for _, c in slots)
        taken = set(counts)
        candidate = 0
        while room < n and len(taken) < limit:
            while candidate in taken:
                candidate += 1
            if candidate >= limit:
                break
            taken.add(candidate)
            slots.append((candidate, self.target))
            room += self.target
        buckets = np.array([b for b, _ in slots], np.int32)
        ends = np.cumsum([c for _, c in slots], dtype=np.int64)
        take = min(n, room)
        out = np.empty(n, np.int32)
        out[:take] = buckets[np.searchsorted(ends, np.arange(take), side="right")]
        if take < n:
            if self.max_buckets == -1:
                raise InvalidOptionError(
                    f"dynamic-bucket.target-row-num: {self.target} keys per bucket need more than "
                    f"{MAX_DYNAMIC_BUCKETS} buckets in one partition; raise it (nothing was written)")
            pool = np.array(sorted(taken), np.int32)
            out[take:] = np.random.default_rng().choice(pool, n - take)
        return out

    def index_files(self) -> dict[tuple[bytes, int], tuple[IndexEntry, str | None]]:
        """(partition, bucket) -> the new HASH index file of each bucket whose hashes grew (written now), and the
        name of the file it replaces (None for a new bucket)."""
        out = {}
        for partition, index in self._partitions.items():
            files = self._files.get(partition, {})
            for b, parts in index.added.items():
                old = index.existing.get(b)
                hashes = np.concatenate(([old] if old is not None else []) + parts)
                previous = files.get(b)
                out[(partition, b)] = (write_hashes(self.table, partition, b, hashes),
                                       previous.file_name if previous is not None else None)
        return out
