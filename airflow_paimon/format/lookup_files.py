"""Local lookup files: an uncompressed Arrow copy of a data file on the worker's disk, for key lookups.

A `changelog-producer = lookup` write and a `diff` need the versions of a few keys out of history files that hold
many more. Parquet decodes whole pages, so taking a few keys spread over a file costs decoding all of it, and a
lookup write would cost the size of the history. Paimon's writers therefore build a local lookup file from a data
file the first time they look into it and answer later lookups from it while it lasts
(`lookup.cache-file-retention`, from its last use; `lookup.cache-max-disk-size`, least recently used first).
This library does the same with an uncompressed Arrow IPC copy of the file's columns: memory-mapped, its sorted
key column is searched in place and only the rows taken are copied out, so a lookup costs what it takes. A
string column the file holds as a small dictionary stays one in the copy (its values decoded only for the rows
taken): a row then costs an index, not a gather from a string column as large as the file.

Beyond Paimon, whose lookup files live as long as the writer: the copies outlive the process, so the next task on
the same worker finds them. That is safe because a data file never changes once written: a copy is named by the
file's name (unique per file) and size, and checked against the file's row count when opened. Copies are kept
per table, under `$AIRFLOW_PAIMON_LOOKUP_DIR` (default `<temp dir>/airflow-paimon-lookup`); an empty value
turns them off, and every lookup then reads the data files themselves. A copy that cannot be made (a full disk,
a column too large for one Arrow array) is skipped the same way: the answer never depends on the copies.

As Paimon keeps its lookup files open in a cache for the writer's life, a process keeps the copies it mapped
mapped for its next lookups (the `MAPPED_COPIES` most recently used): a lookup then pays neither the mapping nor
the faults of the pages an earlier one touched. A mapping holds no file descriptor, and the pages it touched
are page cache, which the kernel can reclaim. A copy is never changed once written (it is replaced by a rename),
so a mapping stays valid after another process replaces or deletes the file; but it would keep a deleted file's
disk space, so a copy this process finds expired or prunes is unmapped at once, and at most every
`SWEEP_SECONDS` the process unmaps the copies others deleted or replaced.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .evolution import DataFileReader, decode_dictionaries
from .kernels import SortedIntegers, ascending_integers
from .manifest import DataFileMeta
from .schema import KEY_FIELD_PREFIX

if TYPE_CHECKING:
    from .table import Table

__all__ = ["LOOKUP_DIR_ENV", "MAPPED_COPIES", "SWEEP_SECONDS", "LookupCopy", "LookupFiles", "keys_ascending"]

LOOKUP_DIR_ENV = "AIRFLOW_PAIMON_LOOKUP_DIR"
# (".v2": small-dictionary strings are kept as dictionaries; copies of the plain kind are left to expire)
_SUFFIX = ".v2.arrow"
_KEYS_ASCENDING = b"airflow-paimon.keys-ascending"
_log = logging.getLogger(__name__)
MAPPED_COPIES = 256
SWEEP_SECONDS = 60.0


def keys_ascending(copy: pa.Table) -> bool:
    """Whether a copy's only key column was found strictly increasing when the copy was made: searches in it
    then need not check the order again (a scan of the whole column on every lookup)."""
    return (copy.schema.metadata or {}).get(_KEYS_ASCENDING) == b"true"


def _key_columns(data: pa.Table) -> list[str]:
    return [n for n in data.column_names if n.startswith(KEY_FIELD_PREFIX)]


def _mark_key_order(data: pa.Table) -> pa.Table:
    keys = _key_columns(data)
    if len(keys) == 1 and ascending_integers(data.column(keys[0])) is not None:
        return data.replace_schema_metadata({**(data.schema.metadata or {}), _KEYS_ASCENDING: b"true"})
    return data


class LookupCopy:
    """The rows of one data file as its lookup file holds them."""

    def __init__(self, data: pa.Table):
        self.data = data

    def take(self, names: list[str], rows: pa.Array) -> pa.Table:
        """The named columns' rows at the positions `rows`, dictionaries decoded."""
        return decode_dictionaries(self.data.select(names).take(rows))

    @cached_property
    def keys(self) -> SortedIntegers | None:
        """The only key column, searchable, when the copy recorded that it strictly increases (made once per copy
        and kept with its mapping)."""
        if not keys_ascending(self.data):
            return None
        (name,) = _key_columns(self.data)
        return SortedIntegers(np.asarray(self.data.column(name).to_numpy()))


class _Mappings:
    """The copies this process has mapped, most recently used last, each with the file (inode) it maps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._copies: OrderedDict[Path, tuple[LookupCopy, int]] = OrderedDict()
        self._swept = time.monotonic()

    def get(self, copy: Path, inode: int) -> LookupCopy:
        """The mapped copy (the file `inode`), mapping it now when this process has not (or has mapped a file
        since replaced)."""
        with self._lock:
            found = self._copies.pop(copy, None)
        mapped = found[0] if found is not None and found[1] == inode else None
        if mapped is None:
            # Closed here: the rows read keep the mapping, not the descriptor. Left to the reader's release, the
            # descriptor was at times still open a moment after read_all returned.
            with pa.memory_map(str(copy)) as source:
                mapped = LookupCopy(pa.ipc.open_file(source).read_all())
        with self._lock:
            self._copies[copy] = (mapped, inode)
            while len(self._copies) > MAPPED_COPIES:
                self._copies.popitem(last=False)
        if time.monotonic() - self._swept > SWEEP_SECONDS:
            self.sweep()
        return mapped

    def sweep(self) -> None:
        """Unmap the copies another process deleted or replaced: a mapping would keep a deleted file's disk space
        allocated, beyond `lookup.cache-max-disk-size`, for as long as the process lives."""
        self._swept = time.monotonic()
        with self._lock:
            held = list(self._copies.items())
        for copy, (_, inode) in held:
            try:
                current: int | None = copy.stat().st_ino
            except OSError:
                current = None
            if current != inode:
                self.drop(copy)

    def drop(self, copy: Path) -> None:
        with self._lock:
            self._copies.pop(copy, None)


_MAPPINGS = _Mappings()


def _root() -> Path | None:
    configured = os.environ.get(LOOKUP_DIR_ENV)
    if configured is None:
        return Path(tempfile.gettempdir()) / "airflow-paimon-lookup"
    return Path(configured) if configured.strip() else None


class LookupFiles:
    """The lookup files of one table on this worker."""

    def __init__(self, table: "Table"):
        self.table = table
        self.io = table.io
        self.retention = table.core_options.lookup_file_retention
        self.max_bytes = table.core_options.lookup_max_disk_size
        root = _root()
        digest = hashlib.sha256(table.path.encode()).hexdigest()[:20]
        self.directory = None if root is None else root / digest
        self.built = 0

    def open(self, path: str, meta: DataFileMeta) -> LookupCopy | None:
        """Every column of the data file at `path` as stored, memory-mapped from its lookup file (made now when
        there is none); None when there is no usable copy, and the caller reads the data file."""
        if self.directory is None:
            return None
        copy = self.directory / f"{meta.file_name}-{meta.file_size}{_SUFFIX}"
        try:
            # A copy unused for longer than the retention has expired, as in Paimon: it is made again.
            status = copy.stat()
            if timedelta(seconds=time.time() - status.st_mtime) <= self.retention:
                mapped = _MAPPINGS.get(copy, status.st_ino)
                if mapped.data.num_rows == meta.row_count:
                    os.utime(copy)
                    return mapped
        except (OSError, pa.ArrowInvalid):
            pass
        _MAPPINGS.drop(copy)
        return self._build(path, copy, self.table.schema_by_id(meta.schema_id).trimmed_primary_keys)

    def _build(self, path: str, copy: Path, keys: list[str]) -> LookupCopy | None:
        try:
            with DataFileReader(self.io, path) as reader:
                # key columns stay plain: they are searched and joined as they are
                plain = keys + [n for n in reader.names if n.startswith(KEY_FIELD_PREFIX)]
                data = _mark_key_order(reader.stored(reader.names, decoded=False, plain=plain).combine_chunks())
            copy.parent.mkdir(parents=True, exist_ok=True)
            partial = copy.with_name(f".{copy.name}.{uuid.uuid4().hex}")
            try:
                with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, data.schema) as writer:
                    writer.write_table(data, max_chunksize=max(data.num_rows, 1))
                os.replace(partial, copy)
            finally:
                partial.unlink(missing_ok=True)
        except (OSError, pa.ArrowInvalid, pa.ArrowCapacityError) as e:
            _log.warning("no lookup file for %s (%s): reading the data file instead", path, e)
            return None
        self.built += 1
        return LookupCopy(data)   # the rows just read: this lookup needs no mapping of the copy it made

    def prune(self) -> None:
        """Drop the copies unused for longer than the retention, then the least recently used ones while the
        copies exceed the disk size. A copy another process still has mapped stays readable to it."""
        if self.directory is None or not self.directory.is_dir():
            return
        now = time.time()
        kept = []
        for entry in os.scandir(self.directory):
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue
            stale = timedelta(seconds=now - stat.st_mtime) > self.retention
            if stale or not entry.name.endswith(_SUFFIX):
                # a partial copy older than the retention was left by a process that died while writing it
                if stale:
                    self._remove(Path(entry.path))
                continue
            kept.append((stat.st_mtime, stat.st_size, entry.path))
        if self.max_bytes is None:
            return
        total = sum(size for _, size, _ in kept)
        for _, size, name in sorted(kept):
            if total <= self.max_bytes:
                break
            self._remove(Path(name))
            total -= size

    @staticmethod
    def _remove(copy: Path) -> None:
        _MAPPINGS.drop(copy)   # unmapped once no lookup holds its rows, so the disk space is freed
        copy.unlink(missing_ok=True)
