"""HASH index files of dynamic-bucket tables (`index/index-<uuid>-<n>`): the key hashes of one bucket.

As Paimon's spec (Table index) and HashIndexFile: nothing but the hashes, each a 4-byte big-endian int, once each.
The hash of a key is `BinaryRow.hashCode()` of its primary key without the partition keys (bucketing.hash_codes),
the same hash a fixed-bucket table takes its bucket from.
"""

from __future__ import annotations

import uuid

import numpy as np

from .errors import CorruptFileError
from .fileio import FileIO
from .index_manifest import HASH_INDEX, IndexFileMeta, index_file_path


def read_hashes(io: FileIO, table_path: str, meta: IndexFileMeta) -> np.ndarray:
    """The key hashes (int32) a HASH index file holds."""
    path = index_file_path(table_path, meta)
    data = io.read_bytes(path)
    if len(data) % 4:
        raise CorruptFileError(f"HASH index file {path} has {len(data)} bytes, not a whole number of 4-byte hashes; "
                               "restore it from a backup")
    return np.frombuffer(data, dtype=">i4").astype(np.int32)


def write_hashes(io: FileIO, table_path: str, hashes: np.ndarray) -> IndexFileMeta:
    """A new HASH index file holding `hashes` (distinct int32), and its metadata for the index manifest."""
    name = f"index-{uuid.uuid4()}-0"
    data = np.asarray(hashes, dtype=np.int32).astype(">i4").tobytes()
    io.write_bytes(f"{table_path}/index/{name}", data)
    return IndexFileMeta(HASH_INDEX, name, len(data), len(hashes))
