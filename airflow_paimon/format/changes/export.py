"""A change feed exported as a folder of Parquet files, complete once its manifest is there.

The folder's guarantees hold whoever writes its files (one process, or many Spark tasks): data files
(``part-*.parquet``) first, then the manifest ``_SUCCESS`` last, a JSON object listing each file with its row
count, the range and the counts by ``_change_type``. Readers read a folder only once its marker exists (Spark's and
Hadoop's convention) and may take the file list from it.

Writing again replaces the folder: the marker goes first (the folder reads as incomplete from then on), then
every file an earlier attempt left, then the new files, and before the marker every part file the manifest does
not list (left by a failed task attempt). So whenever a marker exists, the folder holds exactly the files it
lists. A temporary sibling folder renamed over the old one is not used because object stores have no rename (it
would be a copy, not atomic). A folder holding anything an export does not write is refused before anything is
deleted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import InvalidOptionError
from ..fileio import FileIO

__all__ = ["MARKER", "PartWriter", "clear_folder", "finish_folder", "is_export_file", "kind_counts", "manifest",
           "part_name"]

MARKER = "_SUCCESS"
"""The last file of a complete export: a JSON manifest of its data files and row counts."""


def part_name(index: int, group: int | None = None) -> str:
    """``part-NNNNN.parquet`` of one writer; ``part-GGGGG-NNNNN.parquet`` of writer (task) ``group`` of many, so
    that names sort in the feed's order."""
    return f"part-{index:05d}.parquet" if group is None else f"part-{group:05d}-{index:05d}.parquet"


def is_export_file(name: str) -> bool:
    return name == MARKER or (name.startswith("part-") and name.endswith(".parquet"))


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def clear_folder(io: FileIO, folder: str) -> None:
    """Empty the folder of an earlier attempt, the marker first; refuse a folder that is not an export's."""
    foreign = [_name(info.path) for info in io.list_dir(folder) if not is_export_file(_name(info.path))]
    foreign += [f"{name}/" for name in io.list_subdirs(folder)]
    if foreign:
        raise InvalidOptionError(f"path: {folder} holds {', '.join(sorted(foreign)[:5])}, which an export does not "
                                 "write; give each run an export folder of its own")
    io.delete(f"{folder}/{MARKER}")
    for info in io.list_dir(folder):
        io.delete(info.path)
    io.mkdirs(folder)


def kind_counts(batch: pa.RecordBatch | pa.Table) -> Counter[str]:
    """Rows by ``_change_type``."""
    kinds = pc.value_counts(batch.column("_change_type"))
    return Counter(dict(zip(map(str, kinds.field("values").to_pylist()), kinds.field("counts").to_pylist())))


class PartWriter:
    """Stream batches into Parquet files of at most ``max_rows`` rows each, named by `part_name` (of ``group``);
    `files` (name, rows) and `file_counts` (rows by ``_change_type``, per file) say what was written."""

    def __init__(self, io: FileIO, folder: str, schema: pa.Schema, max_rows: int, group: int | None = None):
        self.io, self.folder, self.schema, self.max_rows, self.group = io, folder, schema, max_rows, group
        self.files: list[tuple[str, int]] = []
        self.file_counts: list[Counter[str]] = []
        self._writer: pq.ParquetWriter | None = None

    def write(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:
            for offset in range(0, batch.num_rows, self.max_rows):
                self._write_slice(batch.slice(offset, self.max_rows))

    def _write_slice(self, batch: pa.RecordBatch) -> None:
        if self._writer is None or self.files[-1][1] + batch.num_rows > self.max_rows:
            self._roll()
        assert self._writer is not None
        self._writer.write_batch(batch)
        name, rows = self.files[-1]
        self.files[-1] = (name, rows + batch.num_rows)
        self.file_counts[-1].update(kind_counts(batch))

    def _roll(self) -> None:
        if self._writer is not None:
            self._writer.close()
        name = part_name(len(self.files), self.group)
        self.io.make_parent(f"{self.folder}/{name}")
        self._writer = pq.ParquetWriter(self.io.fs_path(f"{self.folder}/{name}"), self.schema,
                                        filesystem=self.io.fs)
        self.files.append((name, 0))
        self.file_counts.append(Counter())

    @property
    def counts(self) -> Counter[str]:
        return sum(self.file_counts, Counter())

    def close(self, at_least_one: bool = True) -> None:
        """Close the last file; with ``at_least_one``, write an empty file when nothing was written (a reader
        then still finds the schema)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        elif at_least_one and not self.files:
            name = part_name(0, self.group)
            self.io.make_parent(f"{self.folder}/{name}")
            pq.write_table(self.schema.empty_table(), self.io.fs_path(f"{self.folder}/{name}"),
                           filesystem=self.io.fs)
            self.files.append((name, 0))
            self.file_counts.append(Counter())


def finish_folder(io: FileIO, folder: str, manifest: Mapping[str, Any]) -> None:
    """Complete the folder: delete the part files `manifest` does not list, then write the marker (last)."""
    listed = {f["path"] for f in manifest["files"]}
    for info in io.list_dir(folder):
        name = _name(info.path)
        if name != MARKER and name not in listed:
            io.delete(info.path)
    io.write_bytes(f"{folder}/{MARKER}", json.dumps(dict(manifest), default=str, indent=1).encode())


def manifest(*, table: str, folder: str, start: Any, end: Any, mode: str, files: Iterable[tuple[str, int]],
             counts: Mapping[str, int], consumer: str | None, engine: str) -> dict[str, Any]:
    """The manifest of an export, which is also what the operator returns: ``{"table", "path", "start", "end",
    "mode", "rows", "counts", "files", "consumer", "engine"}``."""
    listed = [{"path": name, "rows": rows} for name, rows in files]
    return {
        "table": table,
        "path": folder,
        "start": start if consumer is None else f"consumer {consumer}",
        "end": end,
        "mode": mode,
        "rows": sum(f["rows"] for f in listed),
        "counts": dict(sorted((str(k), int(v)) for k, v in counts.items())),
        "files": listed,
        "consumer": consumer,
        "engine": engine,
    }
