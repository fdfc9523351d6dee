"""Deletion vectors on disk: Paimon's deletion-vector index files (`index/index-*`), per its Table Index spec.

A deletion-vector index file holds the vectors of one bucket: a version byte (1), then per data file
``<size: int32 BE> <bitmap data: size bytes> <CRC32 of the bitmap data: int32 BE>``. The index manifest records,
per data file, the offset of its size field and that size (`DeletionVectorMeta`). The bitmap data is one of:

- Paimon's default `BitmapDeletionVector`: magic 1581511376 (int32 BE), then a 32-bit RoaringBitmap in the
  portable serialisation;
- `Bitmap64DeletionVector` (``deletion-vectors.bitmap64 = true``, Iceberg's layout): magic 1681511377 (int32 LE),
  then the number of 32-bit bitmaps (int64 LE) and, for each, its high 32 bits (int32 LE) and a portable
  RoaringBitmap of the low 32 bits.

Bitmaps are pyroaring's (CRoaring), whose portable format is RoaringBitmap's; positions travel as sorted numpy
arrays so that applying a vector to a file is one vectorised mask.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Mapping

import numpy as np
from pyroaring import BitMap

from .errors import CorruptFileError
from .fileio import FileIO

INDEX_TYPE = "DELETION_VECTORS"
FILE_VERSION = 1
MAGIC_32 = 1581511376
MAGIC_64 = 1681511377
MAX_32 = 2**31 - 1


@dataclass(frozen=True)
class VectorRange:
    """Where one data file's vector sits in an index file (Paimon's `DeletionVectorMeta`)."""

    data_file: str
    offset: int
    length: int
    cardinality: int | None


def new_index_file_name() -> str:
    return f"index-{uuid.uuid4()}-0"


def _bitmap32(positions: np.ndarray) -> bytes:
    bm = BitMap(positions.astype(np.uint32, copy=False))
    bm.run_optimize()
    return bytes(bm.serialize())


def encode_vector(positions: np.ndarray, bitmap64: bool) -> bytes:
    """One vector as it sits in an index file: size, bitmap data (magic + bitmap), CRC."""
    positions = np.unique(np.asarray(positions, dtype=np.int64))
    if bitmap64:
        highs = positions >> 32
        parts = [struct.pack("<i", MAGIC_64), struct.pack("<q", int(highs[-1]) + 1 if len(highs) else 0)]
        for high in range(int(highs[-1]) + 1 if len(highs) else 0):
            low = positions[highs == high] & 0xFFFFFFFF
            parts += [struct.pack("<i", high), _bitmap32(low)]
        data = b"".join(parts)
    else:
        if len(positions) and positions[-1] > MAX_32:
            raise ValueError(f"row position {int(positions[-1])} does not fit Paimon's 32-bit deletion vector; "
                             "set deletion-vectors.bitmap64 = true for files of more than 2^31 rows")
        data = struct.pack(">i", MAGIC_32) + _bitmap32(positions)
    return struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data) & 0xFFFFFFFF)


def vector_length(size: int, bitmap64: bool) -> int:
    """The length the index manifest records for a vector whose bitmap data is `size` bytes: Paimon records the
    bitmap data's size for the 32-bit format and the whole serialised vector (size and CRC fields included) for
    the 64-bit one (what each format's `serializeTo` returns)."""
    return size + 8 if bitmap64 else size


def decode_vector(blob: bytes, offset: int, length: int, where: str) -> np.ndarray:
    """The sorted deleted positions of the vector at `offset` of an index file's bytes `blob`."""
    def corrupt(reason: str) -> CorruptFileError:
        return CorruptFileError(f"deletion-vector index file {where}: {reason} at offset {offset}; restore the file "
                                "from a backup, or roll back to a snapshot that does not use it")

    if offset < 1 or offset + 8 > len(blob):
        raise corrupt(f"no vector (file of {len(blob)} bytes)")
    (size,) = struct.unpack_from(">i", blob, offset)
    bits64 = struct.unpack_from("<i", blob, offset + 4)[0] == MAGIC_64
    if not bits64 and struct.unpack_from(">i", blob, offset + 4)[0] != MAGIC_32:
        raise corrupt("unknown magic number (neither Paimon's 32-bit nor 64-bit deletion vector)")
    if vector_length(size, bits64) != length or size < 4 or offset + 8 + size > len(blob):
        raise corrupt(f"vector size {size} does not match the index manifest's length {length}")
    data = blob[offset + 4:offset + 4 + size]
    (crc,) = struct.unpack_from(">I", blob, offset + 4 + size)
    if zlib.crc32(data) & 0xFFFFFFFF != crc:
        raise corrupt("checksum mismatch")
    if not bits64:
        return np.asarray(BitMap.deserialize(data[4:]).to_array(), dtype=np.int64)
    (count,) = struct.unpack_from("<q", data, 4)
    pos = 12
    out = []
    for _ in range(count):
        (high,) = struct.unpack_from("<i", data, pos)
        bm = BitMap.deserialize(data[pos + 4:])
        pos += 4 + len(bm.serialize())
        out.append((np.int64(high) << 32) | np.asarray(bm.to_array(), dtype=np.int64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def read_vectors(io: FileIO, path: str, ranges: Mapping[str, VectorRange]) -> dict[str, np.ndarray]:
    """Every vector of one index file, by data file name."""
    blob = io.read_bytes(path)
    if not blob or blob[0] != FILE_VERSION:
        raise CorruptFileError(f"deletion-vector index file {path} does not start with version {FILE_VERSION}; "
                               "restore it from a backup")
    return {name: decode_vector(blob, r.offset, r.length, path) for name, r in ranges.items()}


def write_vectors(io: FileIO, directory: str, vectors: Mapping[str, np.ndarray],
                  bitmap64: bool) -> tuple[str, int, list[VectorRange]]:
    """One index file holding `vectors` (empty ones left out): its name, size and ranges."""
    name = new_index_file_name()
    chunks = [bytes([FILE_VERSION])]
    ranges = []
    position = 1
    for data_file in sorted(vectors):
        positions = vectors[data_file]
        if len(positions) == 0:
            continue
        blob = encode_vector(positions, bitmap64)
        ranges.append(VectorRange(data_file, position, vector_length(len(blob) - 8, bitmap64),
                                  int(len(np.unique(positions)))))
        chunks.append(blob)
        position += len(blob)
    data = b"".join(chunks)
    io.write_bytes(f"{directory}/{name}", data)
    return name, len(data), ranges


def keep_mask(num_rows: int, deleted: np.ndarray | None) -> np.ndarray | None:
    """True for rows a vector does not delete; None when it deletes none."""
    if deleted is None or len(deleted) == 0:
        return None
    keep = np.ones(num_rows, dtype=bool)
    keep[deleted[deleted < num_rows]] = False
    return keep


def read_deletion_files(io: FileIO, deletion_files: Mapping[str, list]) -> dict[str, np.ndarray]:
    """The vectors a split names (data file -> [index file path, offset, length]), each index file read once."""
    by_path: dict[str, dict[str, VectorRange]] = {}
    for name, (path, offset, length) in deletion_files.items():
        by_path.setdefault(path, {})[name] = VectorRange(name, int(offset), int(length), None)
    out: dict[str, np.ndarray] = {}
    for path, ranges in by_path.items():
        out.update(read_vectors(io, path, ranges))
    return out
