"""Filesystem access for tables: local paths, ``s3://``, ``gs://``, ``abfs://`` and any URI pyarrow's filesystems
understand.

The one operation a commit relies on is `create_exclusive`: the snapshot file must be created only if absent,
atomically. On a local or POSIX filesystem a hard link of a finished temporary file gives exactly that. On an
object store (``s3://``, ``s3a://``, ``gs://``, ``abfs://``) a conditional write does (object_store.py), checked
once per FileIO by a probe; a store that ignores it is refused unless ``lock.enabled`` serialises the commits
(commit_lock.py), or unless ``object-store.conditional-writes`` is set to false, where the check-then-write is
best effort and concurrent writers must be serialised by the scheduler. Data files and manifests stream through
pyarrow's filesystems as before.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Iterator, Mapping

import pyarrow.fs as pafs

from .commit_lock import locked
from .errors import InvalidOptionError, UnsafeStoreError
from .object_store import OBJECT_STORE_SCHEMES, ConditionalStore, ObjectVersion, split_uri
from .store_options import (
    CONDITIONAL_WRITES,
    LOCK_DIR,
    LOCK_ENABLED,
    azure_settings,
    flag,
    gcs_settings,
    s3_filesystem_arguments,
    warn_about,
)


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    mtime_ms: int


LISTING_ATTEMPTS = 5
"""Listings of one folder tried before an entry going away while listed is reported (`FileIO._listing`)."""


class FileIO:
    """Paths are plain strings: absolute local paths, or `scheme://bucket/key` for remote filesystems."""

    def __init__(self, warehouse: str, options: Mapping[str, str] | None = None):
        options = dict(options or {})
        warn_about(options)
        self._options = options
        self.lock_enabled = flag(options, LOCK_ENABLED, False)
        self.conditional_writes = flag(options, CONDITIONAL_WRITES, True)
        self._lock_dir = options.get(LOCK_DIR) or None
        self._stores: dict[str, ConditionalStore] = {}
        self._probed: dict[str, bool] = {}
        # An Azure URI names its container as ``container@account.host``; pyarrow's paths start at the container.
        self._azure_authority: tuple[str, str] | None = None
        if "://" in warehouse and not warehouse.startswith("file://"):
            scheme, bucket, _ = split_uri(warehouse)
            if scheme in ("s3", "s3a", "s3n", "oss"):
                # Delayed open: a file that fits in one part is one PUT when the stream closes, not the three
                # requests of a multipart upload (an error to open it is then raised by a write or the close).
                arguments = {**s3_filesystem_arguments(options, scheme), "allow_delayed_open": True}
                self.fs: pafs.FileSystem = pafs.S3FileSystem(**arguments)
            elif scheme in ("gs", "gcs"):
                self.fs = pafs.GcsFileSystem(**gcs_settings(options).pyarrow_arguments())
            elif scheme in ("abfs", "abfss", "az"):
                azure = azure_settings(options, bucket)
                self.fs = pafs.AzureFileSystem(**azure.pyarrow_arguments())
                if bucket != azure.container:
                    self._azure_authority = (bucket, azure.container)
            else:
                self.fs, _ = pafs.FileSystem.from_uri(warehouse)
            self._prefix = scheme + "://"
            self.local = False
            self._object_store = scheme in OBJECT_STORE_SCHEMES
        else:
            self.fs = pafs.LocalFileSystem()
            # Listings name files as the warehouse does (``file://`` or plain), so they compare with table paths.
            self._prefix = "file://" if warehouse.startswith("file://") else ""
            self.local = True
            self._object_store = False

    def _p(self, path: str) -> str:
        """The path as the pyarrow filesystem wants it (no scheme)."""
        if path.startswith("file://"):
            return path[len("file://"):]
        if self._prefix and path.startswith(self._prefix):
            path = path[len(self._prefix):]
        elif "://" in path:
            path = path.split("://", 1)[1]
        if self._azure_authority is not None:
            authority, container = self._azure_authority
            if path == authority or path.startswith(authority + "/"):
                return container + path[len(authority):]
        return path

    def exists(self, path: str) -> bool:
        """A file or a directory (on object stores: a prefix) at `path`."""
        return self.fs.get_file_info(self._p(path)).type != pafs.FileType.NotFound

    def is_file(self, path: str) -> bool:
        """A file at `path`. On an object store one HEAD: `exists` also lists the prefix when no object has the
        name (a "directory"), a second request each time a writer checks that the next snapshot is still free."""
        if self._object_store:
            uri = self._uri(path)
            return self._store(uri).exists(uri)
        return self.fs.get_file_info(self._p(path)).type == pafs.FileType.File

    def read_bytes(self, path: str) -> bytes:
        if self._object_store:  # one GET, where pyarrow's input stream asks for the size first
            uri = self._uri(path)
            return self._store(uri).read(uri)
        with self.fs.open_input_stream(self._p(path)) as f:
            return f.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file; readers never see a partial file (temporary name, then rename; one PUT on an
        object store, without the directory markers pyarrow's filesystems create first)."""
        if self._object_store:
            uri = self._uri(path)
            self._store(uri).write(uri, data)
            return
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
        if self.local:
            self.fs.create_dir(parent, recursive=True)
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
        uri = self._uri(path)
        if self._object_store and self.conditional_writes and self._honours_conditional_writes(uri):
            return self._store(uri).create(uri, data)
        if not self.lock_enabled:
            return self._check_then_write(path, data)
        with locked(self._lock_dir, uri.rsplit("/", 1)[0]):
            return self._check_then_write(path, data)

    def _check_then_write(self, path: str, data: bytes) -> bool:
        if self.is_file(path):
            return False
        self.write_bytes(path, data)
        return True

    def _uri(self, path: str) -> str:
        return path if "://" in path else self._prefix + path

    def _store(self, uri: str) -> ConditionalStore:
        scheme, bucket, _ = split_uri(uri)
        store = self._stores.get(bucket)
        if store is None:
            store = self._stores[bucket] = ConditionalStore(scheme, bucket, self._options)
        return store

    def _honours_conditional_writes(self, uri: str) -> bool:
        """Probe the bucket once: True when it refuses a second create; otherwise refuse to commit without
        the lock (a silent race would lose commits)."""
        bucket = split_uri(uri)[1]
        honoured = self._probed.get(bucket)
        if honoured is None:
            honoured = self._probed[bucket] = self._store(uri).probe(uri.rsplit("/", 1)[0])
        if not honoured and not self.lock_enabled:
            raise UnsafeStoreError(
                f"the object store of {uri.rsplit('/', 1)[0]} ignores conditional writes (If-None-Match), so "
                f"concurrent commits could overwrite each other: set the catalog option {LOCK_ENABLED}=true to "
                f"serialise commits with a lock, or use a store that supports conditional writes")
        return honoured

    def read_versioned(self, path: str) -> tuple[bytes, object] | None:
        """The file's bytes and a version token for `replace_if_unchanged`; None when absent."""
        if not self._object_store or not self.conditional_writes:
            try:
                data = self.read_bytes(path)
            except FileNotFoundError:
                return None
            return data, data
        uri = self._uri(path)
        return self._store(uri).read_versioned(uri)

    def replace_if_unchanged(self, path: str, data: bytes, version: object) -> bool:
        """Overwrite `path` only if it is still at `version` (from `read_versioned`); False when another writer
        changed it meanwhile. Object stores compare e-tags; a local disk compares contents under a host lock."""
        if not self._object_store or not self.conditional_writes or version is None or isinstance(version, bytes):
            with locked(self._lock_dir, self._uri(path)):
                try:
                    current: object = self.read_bytes(path)
                except FileNotFoundError:
                    return False
                if version is not None and current != version:
                    return False
                self.write_bytes(path, data)
                return True
        uri = self._uri(path)
        if not isinstance(version, ObjectVersion):
            raise InvalidOptionError(f"{path}: version {version!r} does not come from read_versioned")
        return self._store(uri).replace(uri, data, version)

    def delete(self, path: str) -> None:
        """Delete a file; an absent one is no error. On an object store one DELETE: pyarrow's S3 filesystem would
        ask for the object first and then write a directory marker where the parent became empty, so an emptied
        partition or bucket would stay listed (and cost two more requests per file)."""
        if self._object_store:
            uri = self._uri(path)
            self._store(uri).delete(uri)
            return
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

    def _listing(self, path: str, recursive: bool) -> list[pafs.FileInfo]:
        """What is in the folder `path` (nothing when it is absent). A local listing fails when an entry goes
        away while it is listed (another writer's temporary file, renamed or removed at that moment, as a fresh
        table's first writers do): the folder is then listed again, as it stands a moment later."""
        sel = pafs.FileSelector(self._p(path), allow_not_found=True, recursive=recursive)
        for _ in range(1, LISTING_ATTEMPTS):
            try:
                return self.fs.get_file_info(sel)
            except FileNotFoundError:
                continue
        return self.fs.get_file_info(sel)

    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children that are files; an absent directory is empty."""
        return [self._info(i) for i in self._listing(path, False) if i.type == pafs.FileType.File]

    def walk(self, path: str) -> Iterator[FileInfo]:
        """Every file below `path`."""
        for i in self._listing(path, True):
            if i.type == pafs.FileType.File:
                yield self._info(i)

    def list_subdirs(self, path: str) -> list[str]:
        if self._object_store:
            uri = self._uri(path)
            return self._store(uri).subdirs(uri)
        return [i.base_name for i in self._listing(path, False) if i.type == pafs.FileType.Directory]

    def make_parent(self, path: str) -> None:
        """Create the folder a file is about to be streamed into. Nothing on an object store, where a key needs
        no folder: pyarrow's S3 filesystem would ask for the bucket and write a marker object per level (five
        requests for a data file of a new bucket), markers that stay listed once the folder's files are gone."""
        if not self._object_store:
            self.fs.create_dir(self._p(path).rsplit("/", 1)[0], recursive=True)

    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(self._p(path), recursive=True)

    def size(self, path: str) -> int:
        return self.fs.get_file_info(self._p(path)).size

    def sizes(self, paths: list[str]) -> dict[str, int]:
        """path -> size of those of `paths` that exist as files (one request per path, none per directory)."""
        infos = self.fs.get_file_info([self._p(p) for p in paths])
        return {p: i.size or 0 for p, i in zip(paths, infos) if i.type == pafs.FileType.File}

    def _info(self, i: pafs.FileInfo) -> FileInfo:
        mtime = i.mtime_ns // 1_000_000 if i.mtime_ns is not None else 0
        path = i.path
        if self._azure_authority is not None:
            authority, container = self._azure_authority
            path = authority + path[len(container):]
        return FileInfo(self._prefix + path if self._prefix else path, i.size or 0, mtime)

    def fs_path(self, path: str) -> str:
        return self._p(path)
