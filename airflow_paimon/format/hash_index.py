"""HASH index files of dynamic-bucket tables (`index/index-<uuid>-<n>`): the key hashes of one bucket.

As Paimon's spec (Table index) and HashIndexFile: nothing but the hashes, each a 4-byte big-endian int, once each.
The hash of a key is `BinaryRow.hashCode()` of its primary key without the partition keys (bucketing.hash_codes),
the same hash a fixed-bucket table takes its bucket from. The index manifest listing them is
deletion_vectors_index.py's (generic over index kinds).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import numpy as np

from .deletion_vectors_index import IndexEntry, index_directory, index_file_path
from .errors import CorruptFileError
from .manifest import ADD

if TYPE_CHECKING:
    from .table import Table

HASH_INDEX = "HASH"


def read_hashes(table: "Table", entry: IndexEntry) -> np.ndarray:
    """The key hashes (int32) a HASH index file holds."""
    path = index_file_path(table, entry)
    data = table.io.read_bytes(path)
    if len(data) % 4:
        raise CorruptFileError(f"HASH index file {path} has {len(data)} bytes, not a whole number of 4-byte hashes; "
                               "restore it from a backup")
    return np.frombuffer(data, dtype=">i4").astype(np.int32)


def write_hashes(table: "Table", partition: bytes, bucket: int, hashes: np.ndarray) -> IndexEntry:
    """A new HASH index file of a bucket holding `hashes` (distinct int32), as its index manifest entry."""
    name = f"index-{uuid.uuid4()}-0"
    data = np.asarray(hashes, dtype=np.int32).astype(">i4").tobytes()
    table.io.write_bytes(f"{index_directory(table, partition, bucket)}/{name}", data)
    rec = {"_VERSION": 1, "_KIND": ADD, "_PARTITION": partition, "_BUCKET": bucket, "_INDEX_TYPE": HASH_INDEX,
           "_FILE_NAME": name, "_FILE_SIZE": len(data), "_ROW_COUNT": len(hashes),
           "_DELETIONS_VECTORS_RANGES": None, "_EXTERNAL_PATH": None, "_GLOBAL_INDEX": None}
    return IndexEntry(partition, bucket, HASH_INDEX, name, rec)
