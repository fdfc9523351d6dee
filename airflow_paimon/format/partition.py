"""Partition values: their directory names (`k=v/`) and their BinaryRow bytes in manifests."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Sequence
from urllib.parse import unquote

import pyarrow as pa

from .binary_row import deserialize_row, serialize_row

# Hive's escaping, which Paimon's PartitionPathUtils follows.
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 0x20)}


def escape_path_name(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


def value_to_path_string(value: Any, default_name: str) -> str:
    if value is None:
        return default_name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        text = value.replace(tzinfo=None).isoformat(sep=" ")
        return escape_path_name(text)
    if isinstance(value, (dt.date, decimal.Decimal)):
        return escape_path_name(str(value))
    if isinstance(value, bytes):
        return escape_path_name(value.hex())
    text = str(value)
    if text.strip() == "":
        return default_name
    return escape_path_name(text)


def partition_path(names: Sequence[str], values: Sequence[Any], default_name: str) -> str:
    """`k1=v1/k2=v2/` (empty for unpartitioned tables)."""
    return "".join(f"{n}={value_to_path_string(v, default_name)}/" for n, v in zip(names, values))


def parse_partition_dir(segment: str) -> tuple[str, str]:
    key, _, value = segment.partition("=")
    return key, unquote(value)


class PartitionCodec:
    """Converts between partition tuples and the BinaryRow bytes manifests carry."""

    def __init__(self, names: Sequence[str], types: Sequence[pa.DataType], default_name: str):
        self.names = list(names)
        self.types = list(types)
        self.default_name = default_name

    def to_bytes(self, values: Sequence[Any]) -> bytes:
        return serialize_row(list(values), self.types)

    def from_bytes(self, data: bytes) -> tuple:
        if not self.names:
            return ()
        return tuple(deserialize_row(data, self.types))

    def path(self, values: Sequence[Any]) -> str:
        return partition_path(self.names, values, self.default_name)

    def as_dict(self, values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(self.names, values))
