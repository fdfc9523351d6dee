"""Table options this library reads, with Paimon's names and defaults, validated when a table is opened."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping, Sequence

from . import periods
from .errors import InvalidOptionError, UnsupportedTableError

def parse_duration(text: str, option: str = "duration") -> timedelta:
    """Paimon's duration syntax (`1 h`, `30min`, `7d`), with errors that name the option."""
    try:
        return periods.parse_duration(text)
    except ValueError as e:
        raise InvalidOptionError(f"{option}: {e}") from None


def _int(options: Mapping[str, str], key: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError(f"{key}: {raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise InvalidOptionError(f"{key}: {value} is below the minimum {minimum}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    if str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    raise InvalidOptionError(f"{key}: {raw!r} is not 'true' or 'false'")


def _field_list(options: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = options.get(key)
    if not raw:
        return ()
    names = tuple(f.strip() for f in str(raw).split(","))
    if not all(names):
        raise InvalidOptionError(f"{key}: {raw!r} has an empty field name; give comma-separated column names")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidOptionError(f"{key}: {repeated} named more than once in {raw!r}")
    return names


# Paimon's ignore-delete and the older names it falls back to, in the order it reads them.
IGNORE_DELETE_KEYS = ("ignore-delete", "first-row.ignore-delete", "deduplicate.ignore-delete",
                      "partial-update.ignore-delete")

COMPRESSIONS = {"zstd", "snappy", "gzip", "lz4", "none", "uncompressed", "brotli"}


@dataclass(frozen=True)
class TableOptions:
    """The options that change how this library reads and writes a table."""

    bucket: int
    bucket_key: tuple[str, ...] | None
    merge_engine: str
    file_format: str
    file_compression: str
    sequence_fields: tuple[str, ...]
    sequence_descending: bool
    rowkind_field: str | None
    ignore_delete: bool
    ignore_update_before: bool
    changelog_producer: str
    partition_default_name: str
    snapshot_num_retained_min: int
    snapshot_num_retained_max: int
    snapshot_time_retained: timedelta
    snapshot_expire_limit: int
    target_file_size: int
    raw: Mapping[str, str]

    def check_fields(self, field_names: Sequence[str]) -> None:
        """The columns that options name exist in the table (as Paimon's schema validation demands)."""
        named = [("sequence.field", f) for f in self.sequence_fields]
        if self.rowkind_field:
            named.append(("rowkind.field", self.rowkind_field))
        for key, name in named:
            if name not in field_names:
                raise InvalidOptionError(f"{key}: column {name!r} is not in the table schema {list(field_names)}")

    @classmethod
    def parse(cls, options: Mapping[str, str], has_primary_key: bool) -> "TableOptions":
        bucket = _int(options, "bucket", -1)
        if has_primary_key and (bucket is None or bucket < 1):
            raise UnsupportedTableError(
                f"bucket: primary-key tables need a fixed bucket number >= 1 (got {bucket}); "
                "dynamic and postpone bucket modes are not supported")
        if not has_primary_key and bucket != -1:
            raise UnsupportedTableError(
                f"bucket: append-only tables are supported with bucket = -1 only (got {bucket})")
        merge_engine = options.get("merge-engine", "deduplicate")
        if merge_engine != "deduplicate":
            raise UnsupportedTableError(f"merge-engine: {merge_engine!r} is not supported (only 'deduplicate')")
        if _bool(options, "deletion-vectors.enabled", False):
            raise UnsupportedTableError("deletion-vectors.enabled: tables with deletion vectors are not supported")
        file_format = options.get("file.format", "parquet").lower()
        if file_format != "parquet":
            raise UnsupportedTableError(f"file.format: {file_format!r} is not supported (only 'parquet')")
        compression = options.get("file.compression", "zstd").lower()
        if compression not in COMPRESSIONS:
            raise InvalidOptionError(f"file.compression: unknown codec {compression!r}")
        changelog = options.get("changelog-producer", "none")
        if changelog not in ("none", "input", "lookup", "full-compaction"):
            raise InvalidOptionError(f"changelog-producer: unknown value {changelog!r}")
        bucket_key = options.get("bucket-key")
        seq_fields = _field_list(options, "sequence.field")
        sort_order = str(options.get("sequence.field.sort-order", "ascending")).strip().lower()
        if sort_order not in ("ascending", "descending"):
            raise InvalidOptionError(f"sequence.field.sort-order: {sort_order!r} is not 'ascending' or 'descending'")
        retained_min = _int(options, "snapshot.num-retained.min", 10, minimum=1)
        retained_max = _int(options, "snapshot.num-retained.max", 2**31 - 1, minimum=1)
        if retained_max < retained_min:
            raise InvalidOptionError(
                f"snapshot.num-retained.max: {retained_max} is below snapshot.num-retained.min {retained_min}")
        return cls(
            bucket=bucket,
            bucket_key=tuple(k.strip() for k in bucket_key.split(",")) if bucket_key else None,
            merge_engine=merge_engine,
            file_format=file_format,
            file_compression="none" if compression == "uncompressed" else compression,
            sequence_fields=seq_fields,
            sequence_descending=sort_order == "descending",
            rowkind_field=options.get("rowkind.field") or None,
            ignore_delete=_bool(options, next((k for k in IGNORE_DELETE_KEYS if k in options), "ignore-delete"),
                                False),
            ignore_update_before=_bool(options, "ignore-update-before", False),
            changelog_producer=changelog,
            partition_default_name=options.get("partition.default-name", "__DEFAULT_PARTITION__"),
            snapshot_num_retained_min=retained_min,
            snapshot_num_retained_max=retained_max,
            snapshot_time_retained=parse_duration(options.get("snapshot.time-retained", "1 h"),
                                                  "snapshot.time-retained"),
            snapshot_expire_limit=_int(options, "snapshot.expire.limit", 10, minimum=1),
            target_file_size=_parse_memory(options.get("target-file-size", "128 mb"), "target-file-size"),
            raw=dict(options),
        )


_MEMORY_UNITS = {"": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
                 "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def _parse_memory(text: str, option: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _MEMORY_UNITS:
        raise InvalidOptionError(f"{option}: {text!r} is not a memory size (examples: '128 mb', '1 gb')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]
