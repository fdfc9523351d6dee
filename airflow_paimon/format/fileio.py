"""Filesystem access for tables: local paths and any URI pyarrow's filesystems understand.

The one operation a commit relies on is `create_exclusive`: the snapshot file must be created only if absent,
atomically. On a local or POSIX filesystem a hard link of a finished temporary file gives exactly that. Object
stores without conditional writes cannot give it; there the check-then-write is best effort and concurrent
writers must be serialised by the scheduler (as Airflow does with one task per table).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Iterator, Mapping

import pyarrow.fs as pafs

from .store_options import s3_filesystem_arguments, warn_about


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    mtime_ms: int


class FileIO:
    """Paths are plain strings: absolute local paths, or `scheme://bucket/key` for remote filesystems."""

    def __init__(self, warehouse: str, options: Mapping[str, str] | None = None):
        options = dict(options or {})
        warn_about(options)
        if "://" in warehouse and not warehouse.startswith("file://"):
            scheme = warehouse.split("://", 1)[0]
            if scheme in ("s3", "s3a", "s3n", "oss"):
                self.fs: pafs.FileSystem = pafs.S3FileSystem(**s3_filesystem_arguments(options, scheme))
            else:
                self.fs, _ = pafs.FileSystem.from_uri(warehouse)
            self._prefix = scheme + "://"
            self.local = False
        else:
            self.fs = pafs.LocalFileSystem()
            # Listings name files as the warehouse does (``file://`` or plain), so they compare with table paths.
            self._prefix = "file://" if warehouse.startswith("file://") else ""
            self.local = True

    def _p(self, path: str) -> str:
        """The path as the pyarrow filesystem wants it (no scheme)."""
        if path.startswith("file://"):
            return path[len("file://"):]
        if self._prefix and path.startswith(self._prefix):
            return path[len(self._prefix):]
        if "://" in path:
            return path.split("://", 1)[1]
        return path

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(self._p(path)).type != pafs.FileType.NotFound

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_stream(self._p(path)) as f:
            return f.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file; readers never see a partial file (temporary name, then rename)."""
        p = self._p(path)
        parent = p.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        if self.local:
            tmp = f"{parent}/.{p.rsplit('/', 1)[1]}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        else:
            with self.fs.open_output_stream(p) as f:
                f.write(data)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create `path` with `data` only if it does not exist; True when this call created it."""
        p = self._p(path)
        parent = p.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        if self.local:
            tmp = f"{parent}/.{p.rsplit('/', 1)[1]}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, p)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        if self.exists(path):
            return False
        with self.fs.open_output_stream(p) as f:
            f.write(data)
        return True

    def delete(self, path: str) -> None:
        try:
            self.fs.delete_file(self._p(path))
        except FileNotFoundError:
            pass

    def delete_dir_if_empty(self, path: str) -> None:
        p = self._p(path)
        if self.local:
            try:
                os.rmdir(p)
            except OSError:
                pass

    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children that are files; an absent directory is empty."""
        sel = pafs.FileSelector(self._p(path), allow_not_found=True, recursive=False)
        return [self._info(i) for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.File]

    def walk(self, path: str) -> Iterator[FileInfo]:
        """Every file below `path`."""
        sel = pafs.FileSelector(self._p(path), allow_not_found=True, recursive=True)
        for i in self.fs.get_file_info(sel):
            if i.type == pafs.FileType.File:
                yield self._info(i)

    def list_subdirs(self, path: str) -> list[str]:
        sel = pafs.FileSelector(self._p(path), allow_not_found=True, recursive=False)
        return [i.base_name for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.Directory]

    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(self._p(path), recursive=True)

    def size(self, path: str) -> int:
        return self.fs.get_file_info(self._p(path)).size

    def _info(self, i: pafs.FileInfo) -> FileInfo:
        mtime = i.mtime_ns // 1_000_000 if i.mtime_ns is not None else 0
        return FileInfo(self._prefix + i.path if self._prefix else i.path, i.size or 0, mtime)

    def fs_path(self, path: str) -> str:
        return self._p(path)
