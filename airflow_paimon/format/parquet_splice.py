"""Parquet files made of the encoded column chunks of others, without encoding any row again.

A lookup write's changelog holds the rows of the data file it writes beside it (its +I and +U rows), only with
other row kinds, plus the former values of the keys it changed (-U). Encoding those rows a second time is most of
a changelog's cost. Parquet locates every column chunk by byte offsets kept in the file's footer, so a file can be
put together from chunks already encoded elsewhere: their bytes are copied, and a new footer lists them at their
new offsets. `splice` builds such a file from files written by pyarrow, keeping the row groups of the first as
they are and taking from the later ones the row groups, or single columns of them, asked for.

The footer is Thrift's compact protocol. Only the fields that hold byte offsets (of a row group, a column chunk,
its pages, its bloom filter and page indexes) and the row-group sizes are decoded and written again; every other
byte of the footers (schema, statistics, encodings) is copied as it is. A footer field this module does not
expect (encryption) makes it refuse, so that a file it cannot splice exactly is written the usual way instead.

A column of small integers (a changelog's row kinds) is cheaper to encode here than through pyarrow's writer,
whose fixed cost per file is ten times the encoding of a bucket's kinds: `plain_int32_file` writes it as a
Parquet file of its own, plain-encoded, one page per row group, for `splice` to take its chunks from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["PLAIN_COLUMN_CODECS", "ParquetParts", "SpliceError", "plain_int32_file", "splice"]

_MAGIC = b"PAR1"
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# Offsets a footer holds, by struct: RowGroup.file_offset; ColumnChunk.file_offset, offset_index_offset,
# column_index_offset; ColumnMetaData.data_page_offset, index_page_offset, dictionary_page_offset,
# bloom_filter_offset.
_ROW_GROUP_OFFSETS = {5}
_CHUNK_OFFSETS = {2, 4, 6}
_COLUMN_META = 3
_META_OFFSETS = {9, 10, 11, 14}
_META_UNCOMPRESSED, _META_COMPRESSED = 6, 7
# Parquet's CompressionCodec numbers of the codecs whose pages are what pyarrow's codec of the same name makes
# (a raw Snappy block, a Zstandard frame); the others are written by pyarrow's writer.
PLAIN_COLUMN_CODECS: dict[str, tuple[int, Literal["snappy", "zstd"] | None]] = {
    "none": (0, None), "snappy": (1, "snappy"), "zstd": (6, "zstd")}
_INT32, _PLAIN, _RLE, _DATA_PAGE, _REQUIRED = 1, 0, 3, 0, 0


class SpliceError(ValueError):
    """A file whose footer this module does not splice (so the caller writes the file the usual way)."""


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _encode_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _encode_long(v: int) -> bytes:
    return _encode_varint((v << 1) ^ (v >> 63))


def _skip(b: bytes, i: int, kind: int) -> int:
    """The end of a value of type `kind` starting at `i`. Integers and strings inside a struct are stepped over
    in its own loop: a footer is mostly those, and a call apiece would double the time of a walk."""
    if kind == _STRUCT:
        while True:
            head = b[i]
            i += 1
            if head == _STOP:
                return i
            kind = head & 0x0F
            if not head >> 4:            # a field id too far from the previous one follows as a varint
                while b[i] & 0x80:
                    i += 1
                i += 1
            if kind <= _FALSE:
                continue
            if _I16 <= kind <= _I64:
                while b[i] & 0x80:
                    i += 1
                i += 1
            elif kind == _BINARY:
                n, i = _varint(b, i)
                i += n
            else:
                i = _skip(b, i, kind)
    if kind in (_I16, _I32, _I64):
        while b[i] & 0x80:
            i += 1
        return i + 1
    if kind == _BINARY:
        n, i = _varint(b, i)
        return i + n
    if kind in (_LIST, _SET):
        n, element, i = _list_header(b, i)
        if element <= _BYTE:
            return i + n
        for _ in range(n):
            i = _skip(b, i, element)
        return i
    if kind == _BYTE:
        return i + 1
    if kind == _DOUBLE:
        return i + 8
    raise SpliceError(f"a Thrift value of type {kind}, which Parquet footers do not hold")


def _list_header(b: bytes, i: int) -> tuple[int, int, int]:
    head = b[i]
    n, element = head >> 4, head & 0x0F
    i += 1
    if n == 15:
        n, i = _varint(b, i)
    return n, element, i


def _field_header(b: bytes, i: int, last: int) -> tuple[int, int, int]:
    """(field id, type, where the value starts) of the field header at `i` (not STOP); `last`: the previous
    field's id, from which a short header counts."""
    head = b[i]
    kind, delta = head & 0x0F, head >> 4
    if delta:
        return last + delta, kind, i + 1
    raw, i = _varint(b, i + 1)        # a field id too far from the previous one follows as a varint
    return _zigzag(raw), kind, i


def _list_of_structs(n: int) -> bytes:
    return bytes([(n << 4) | _STRUCT]) if n < 15 else bytes([0xF0 | _STRUCT]) + _encode_varint(n)


@dataclass
class _Chunk:
    """One column chunk's ColumnChunk struct (`data[start:end]`), where its offsets are (`offsets`: their
    varints' spans in `data`), and its sizes."""
    data: bytes
    start: int
    end: int
    offsets: list[tuple[int, int]]
    compressed: int
    uncompressed: int

    def encoded(self, shift: int, out: bytearray) -> None:
        """Append the struct to `out`, its offsets moved by `shift`."""
        b, at = self.data, self.start
        if shift:
            for lo, hi in self.offsets:
                value = _zigzag(_varint(b, lo)[0])
                # A zero offset is "not set" (parquet-cpp writes ColumnChunk.file_offset as 0): it stays so.
                out += b[at:lo]
                out += _encode_long(value + shift if value else 0)
                at = hi
        out += b[at:self.end]


def _read_chunk(b: bytes, i: int) -> _Chunk:
    """The ColumnChunk struct at `i`, in one walk: ColumnChunk's offsets, then its ColumnMetaData's."""
    start, offsets = i, []
    compressed = uncompressed = -1
    fid = 0
    while b[i] != _STOP:
        fid, kind, i = _field_header(b, i, fid)
        if kind == _STRUCT and fid == _COLUMN_META:
            meta = 0
            while b[i] != _STOP:
                meta, kind, i = _field_header(b, i, meta)
                end = i if kind <= _FALSE else _skip(b, i, kind)
                if kind == _I64:
                    if meta in _META_OFFSETS:
                        offsets.append((i, end))
                    elif meta == _META_COMPRESSED:
                        compressed = _zigzag(_varint(b, i)[0])
                    elif meta == _META_UNCOMPRESSED:
                        uncompressed = _zigzag(_varint(b, i)[0])
                i = end
            i += 1
            continue
        end = i if kind <= _FALSE else _skip(b, i, kind)
        if kind == _I64 and fid in _CHUNK_OFFSETS:
            offsets.append((i, end))
        i = end
    if compressed < 0 or uncompressed < 0:
        raise SpliceError("a column chunk without its sizes (its metadata in another file)")
    return _Chunk(b, start, i + 1, offsets, compressed, uncompressed)


@dataclass
class _RowGroup:
    num_rows: int
    first_offset: int
    has_ordinal: bool
    raw: bytes            # the RowGroup struct as read, kept as it is where the group does not move
    chunks: list[_Chunk]  # its column chunks


@dataclass
class _Moved:
    """A row group of the file `splice` makes, at a new place."""
    chunks: list[tuple[_Chunk, int]]   # each with how far its offsets move
    num_rows: int
    first_offset: int
    has_ordinal: bool


class ParquetParts:
    """The encoded row groups of one Parquet file (its bytes from pyarrow), for `splice`: the footer is walked
    once, each row group's column chunks read on the way (walking them again for each use was most of a splice's
    time)."""

    def __init__(self, data: bytes):
        if len(data) < 12 or data[:4] != _MAGIC or data[-4:] != _MAGIC:
            raise SpliceError("not a Parquet file")
        length = int.from_bytes(data[-8:-4], "little")
        self.data = data
        self.footer_start = len(data) - 8 - length
        self.fields: list[tuple[int, int, int]] = []   # (id, start of its header, end of its value)
        self.row_groups: list[_RowGroup] = []
        i, fid = self.footer_start, 0
        while data[i] != _STOP:
            at = i
            fid, kind, i = _field_header(data, i, fid)
            if fid > 7:
                raise SpliceError(f"a Parquet footer with field {fid} (encryption), which is not spliced")
            if fid == 4 and kind == _LIST:
                n, _, i = _list_header(data, i)
                for _ in range(n):
                    group, i = self._row_group(i)
                    self.row_groups.append(group)
            elif kind > _FALSE:
                i = _skip(data, i, kind)
            self.fields.append((fid, at, i))
        if not self.row_groups and self.num_rows:
            raise SpliceError("a Parquet footer without row groups")

    @property
    def num_rows(self) -> int:
        return sum(g.num_rows for g in self.row_groups)

    def chunks(self, index: int) -> list[_Chunk]:
        """The column chunks of row group `index`."""
        return self.row_groups[index].chunks

    def _row_group(self, i: int) -> tuple[_RowGroup, int]:
        b, start = self.data, i
        num_rows = first = fid = 0
        chunks: list[_Chunk] = []
        ordinal = False
        while b[i] != _STOP:
            fid, kind, i = _field_header(b, i, fid)
            if fid == 1 and kind == _LIST:
                n, _, i = _list_header(b, i)
                for _ in range(n):
                    chunk = _read_chunk(b, i)
                    chunks.append(chunk)
                    i = chunk.end
                continue
            end = i if kind <= _FALSE else _skip(b, i, kind)
            if fid == 3 and kind == _I64:
                num_rows = _zigzag(_varint(b, i)[0])
            elif fid in _ROW_GROUP_OFFSETS and kind == _I64:
                first = _zigzag(_varint(b, i)[0])
            elif fid == 4:
                raise SpliceError("a row group with sorting columns, which is not spliced")
            elif fid == 7:
                ordinal = True
            i = end
        return _RowGroup(num_rows, first, ordinal, b[start:i + 1], chunks), i + 1


def _row_group_bytes(group: _Moved, ordinal: int) -> bytes:
    """A RowGroup struct: columns (1), total_byte_size (2), num_rows (3), file_offset (5),
    total_compressed_size (6), ordinal (7)."""
    out = bytearray()
    out.append(0x10 | _LIST)
    out += _list_of_structs(len(group.chunks))
    for chunk, shift in group.chunks:
        chunk.encoded(shift, out)
    out.append(0x10 | _I64)
    out += _encode_long(sum(c.uncompressed for c, _ in group.chunks))
    out.append(0x10 | _I64)
    out += _encode_long(group.num_rows)
    out.append(0x20 | _I64)
    out += _encode_long(group.first_offset)
    out.append(0x10 | _I64)
    out += _encode_long(sum(c.compressed for c, _ in group.chunks))
    if group.has_ordinal:   # readers want all groups or none numbered (arrow-rs refuses a mix)
        out.append(0x10 | _I16)
        out += _encode_long(ordinal)
    out.append(_STOP)
    return bytes(out)


def splice(first: ParquetParts, later: list[tuple[ParquetParts, dict[int, tuple[ParquetParts, int]]]]) -> bytes:
    """One Parquet file: the row groups of `first` as they are, then those of each later file, in order.

    Each later file comes with the columns to take from elsewhere: {column index: (file, its column index)},
    that file holding as many row groups of the same rows (a column declared as the one it replaces: name, type
    and nullability; written with the same row-group size). Every file's schema must be `first`'s: the footer of
    the file made is `first`'s, with the row groups added and the row count raised.
    """
    groups: list[_RowGroup | _Moved] = [g for g in first.row_groups if g.num_rows]   # pyarrow writes no
    # rows as one empty group (whose chunks are then left out too: the next file's chunks stay where they are)
    # (views, not copies: the file's bytes are copied once, by the join at the end)
    bodies: list[bytes | memoryview] = [memoryview(first.data)[:first.footer_start] if groups else _MAGIC]
    at = len(bodies[0])                  # where the next file's body goes
    shifts: dict[int, int] = {}          # id(file) -> how far its chunks move
    for parts, replaced in later:
        for source in [parts] + [f for f, _ in replaced.values()]:
            if id(source) not in shifts:
                shifts[id(source)] = at - 4
                body = memoryview(source.data)[4:source.footer_start]
                bodies.append(body)
                at += len(body)
        for g_index, group in enumerate(parts.row_groups):
            chunks = []
            for c_index, chunk in enumerate(parts.chunks(g_index)):
                source, column = parts, c_index
                if c_index in replaced:
                    source, column = replaced[c_index]
                    if len(source.row_groups) != len(parts.row_groups) \
                            or source.row_groups[g_index].num_rows != group.num_rows:
                        raise SpliceError("a column taken from a file whose row groups differ")
                    chunk = source.chunks(g_index)[column]
                chunks.append((chunk, shifts[id(source)]))
            first_offset = group.first_offset + shifts[id(parts)] if group.first_offset else 0
            groups.append(_Moved(chunks, group.num_rows, first_offset, group.has_ordinal))
    if len({g.has_ordinal for g in groups}) > 1:
        raise SpliceError("row groups numbered in one file and not in another")
    footer = bytearray()
    rows = first.num_rows + sum(p.num_rows for p, _ in later)
    data = first.data
    for fid, start, end in first.fields:
        if fid == 3:
            # the field header is kept (same id, same place), the count written anew
            header_end = start + 1 if data[start] >> 4 else _skip(data, start + 1, _I16)
            footer += data[start:header_end] + _encode_long(rows)
        elif fid == 4:
            header_end = start + 1 if data[start] >> 4 else _skip(data, start + 1, _I16)
            footer += data[start:header_end]
            footer += _list_of_structs(len(groups))
            for ordinal, made in enumerate(groups):
                footer += made.raw if isinstance(made, _RowGroup) else _row_group_bytes(made, ordinal)
        else:
            footer += data[start:end]
    footer.append(_STOP)
    return b"".join([*bodies, footer, len(footer).to_bytes(4, "little"), _MAGIC])


def _int_field(fid_delta: int, kind: int, value: int) -> bytes:
    """A field (its id `fid_delta` above the previous one) of an integer type, zigzag-encoded."""
    return bytes([(fid_delta << 4) | kind]) + _encode_long(value)


def _string(value: str) -> bytes:
    raw = value.encode()
    return _encode_varint(len(raw)) + raw


def _column_chunk(name: str, codec: int, num_values: int, uncompressed: int, compressed: int,
                  page_offset: int) -> _Chunk:
    """The ColumnChunk struct of one plain-encoded INT32 column chunk starting at `page_offset`."""
    out = bytearray(_int_field(2, _I64, 0))   # file_offset: unset, as parquet-cpp writes it
    out.append(0x10 | _STRUCT)                # meta_data (field 3)
    out += _int_field(1, _I32, _INT32)
    out += bytes([0x10 | _LIST, 0x20 | _I32]) + _encode_long(_PLAIN) + _encode_long(_RLE)
    out += bytes([0x10 | _LIST, 0x10 | _BINARY]) + _string(name)
    out += _int_field(1, _I32, codec) + _int_field(1, _I64, num_values)
    out += _int_field(1, _I64, uncompressed) + _int_field(1, _I64, compressed)
    offset_at = len(out) + 1
    out += _int_field(2, _I64, page_offset)   # data_page_offset (field 9)
    out += bytes([_STOP, _STOP])
    data = bytes(out)
    return _Chunk(data, 0, len(data), [(offset_at, len(data) - 2)], compressed, uncompressed)


def plain_int32_file(name: str, values: np.ndarray, group_rows: Sequence[int], compression: str,
                     level: int | None = None) -> bytes:
    """A Parquet file of one REQUIRED INT32 column `name` holding `values`, in row groups of `group_rows` rows, each
    one PLAIN data page compressed with `compression` (a key of `PLAIN_COLUMN_CODECS`) at `level` (None: the
    codec's default), without statistics."""
    codec, compressor_name = PLAIN_COLUMN_CODECS[compression]
    compressor = pa.Codec(compressor_name, compression_level=level) if compressor_name is not None else None
    body = bytearray(_MAGIC)
    groups: list[_Moved] = []
    start = 0
    for rows in group_rows:
        raw = np.ascontiguousarray(values[start:start + rows], dtype="<i4").tobytes()
        start += rows
        page = compressor.compress(raw, asbytes=True) if compressor is not None else raw
        header = bytearray(_int_field(1, _I32, _DATA_PAGE) + _int_field(1, _I32, len(raw)))
        header += _int_field(1, _I32, len(page))
        header.append(0x20 | _STRUCT)   # data_page_header (field 5)
        header += _int_field(1, _I32, rows) + _int_field(1, _I32, _PLAIN)
        header += _int_field(1, _I32, _RLE) + _int_field(1, _I32, _RLE)   # the levels' encodings (none here)
        header += bytes([_STOP, _STOP])
        offset = len(body)
        body += header + page
        chunk = _column_chunk(name, codec, rows, len(header) + len(raw), len(header) + len(page), offset)
        groups.append(_Moved([(chunk, 0)], rows, offset, False))
    if start != len(values):
        raise ValueError(f"{len(values)} values in row groups of {sum(group_rows)} rows")
    footer = bytearray(_int_field(1, _I32, 1))   # version
    footer.append(0x10 | _LIST)                  # schema: the root, then the column
    footer += _list_of_structs(2)
    footer += bytes([0x40 | _BINARY]) + _string("schema") + _int_field(1, _I32, 1) + bytes([_STOP])
    footer += _int_field(1, _I32, _INT32) + _int_field(2, _I32, _REQUIRED) + bytes([0x10 | _BINARY]) + _string(name)
    footer.append(_STOP)
    footer += _int_field(1, _I64, len(values))   # num_rows
    footer.append(0x10 | _LIST)                  # row_groups
    footer += _list_of_structs(len(groups))
    for ordinal, group in enumerate(groups):
        footer += _row_group_bytes(group, ordinal)
    footer.append(_STOP)
    return b"".join([bytes(body), bytes(footer), len(footer).to_bytes(4, "little"), _MAGIC])
