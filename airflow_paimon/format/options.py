"""Table options this library reads, with Paimon's names and defaults, validated when a table is opened."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Mapping, Sequence

from .errors import InvalidOptionError
from .file_codec import FileCodec
from .stats_modes import StatsPolicy
from .table_kind import TableKind
from .upkeep.expire_policy import ExpirePolicy
from .values import count, duration, level_map, option_boolean


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    return option_boolean(raw, key)


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

# Paimon's `changelog-producer` values, cheapest first.
CHANGELOG_PRODUCERS = ("none", "input", "lookup", "full-compaction")


@dataclass(frozen=True)
class TableOptions:
    """The options that change how this library reads and writes a table."""

    bucket: int
    bucket_key: tuple[str, ...] | None
    merge_engine: str
    file_format: str
    file_compression: str
    # changelog-file.compression (Paimon: the data files' codec unless set)
    changelog_file_compression: str
    sequence_fields: tuple[str, ...]
    sequence_descending: bool
    rowkind_field: str | None
    ignore_delete: bool
    ignore_update_before: bool
    changelog_producer: str
    changelog_row_deduplicate: bool
    changelog_row_deduplicate_ignore_fields: tuple[str, ...]
    full_compaction_delta_commits: int | None
    partition_default_name: str
    partition_legacy_name: bool
    snapshot_num_retained_min: int
    snapshot_num_retained_max: int
    snapshot_time_retained: timedelta
    snapshot_expire_limit: int
    target_file_size: int
    dynamic_bucket_target_row_num: int
    dynamic_bucket_max_buckets: int
    read_refusal: str | None
    write_refusal: str | None
    raw: Mapping[str, str]
    # deletion-vectors.enabled / .bitmap64 / .merge-on-read (see deletion_vectors.py)
    deletion_vectors: bool = False
    deletion_vectors_bitmap64: bool = False
    deletion_vectors_merge_on_read: bool = False
    # lookup.cache-file-retention / lookup.cache-max-disk-size (None: unbounded) of the lookup files (lookup_files.py)
    lookup_file_retention: timedelta = timedelta(hours=1)
    lookup_max_disk_size: int | None = None
    # data-file.prefix / changelog-file.prefix: the start of each new file's name
    data_file_prefix: str = "data-"
    changelog_file_prefix: str = "changelog-"
    # data-file.path-directory: the folder under the table that holds the partition and bucket folders
    data_file_directory: str | None = None
    # fields.<name>.default-value: what a NULL of that column reads as
    field_default_values: Mapping[str, str] = field(default_factory=dict)
    # metadata.stats-mode and the options refining it: the statistics each new file keeps (stats_modes.py)
    stats: StatsPolicy = field(default_factory=StatsPolicy)
    # write-only: writes compact nothing (no lookup changelog, no level-up, no full compaction after them), leaving
    # it to a dedicated compaction job, as Paimon's writers then do
    write_only: bool = False
    # bucket-function.type: default, mod or hive (bucket_functions.py); how a fixed bucket is chosen
    bucket_function: str = "default"
    # file.compression.zstd-level: the level of every zstd file written (Paimon's Parquet writer takes it too)
    zstd_level: int = 1
    # file.compression.per.level: a primary-key table's data files of these levels take these codecs instead
    compression_per_level: Mapping[int, str] = field(default_factory=dict)

    def data_codec(self, level: int | None) -> FileCodec:
        """The codec of a data file written at `level` (None: an append table's file), as Paimon's writers choose
        it: `file.compression.per.level` for a primary-key table's level, else `file.compression`."""
        name = self.file_compression if level is None else self.compression_per_level.get(level, self.file_compression)
        return FileCodec(name, self.zstd_level)

    @property
    def changelog_codec(self) -> FileCodec:
        """The codec of a changelog file: `changelog-file.compression`, else `file.compression` (whatever the
        level, as in Paimon)."""
        return FileCodec(self.changelog_file_compression, self.zstd_level)

    @property
    def writes_settle_vectors(self) -> bool:
        """Whether a write to a deletion-vector table moves its rows out of level 0 and marks the vectors itself;
        under write-only the table's compaction does."""
        return self.deletion_vectors and not self.write_only

    def check_fields(self, field_names: Sequence[str]) -> None:
        """The columns that options name exist in the table (as Paimon's schema validation demands)."""
        named = [("sequence.field", f) for f in self.sequence_fields]
        named += [("changelog-producer.row-deduplicate-ignore-fields", f)
                  for f in self.changelog_row_deduplicate_ignore_fields]
        if self.rowkind_field:
            named.append(("rowkind.field", self.rowkind_field))
        for key, name in named:
            if name not in field_names:
                raise InvalidOptionError(f"{key}: column {name!r} is not in the table schema {list(field_names)}")

    @classmethod
    def parse(cls, options: Mapping[str, str], has_primary_key: bool) -> "TableOptions":
        """Read the options, refusing bad values; what this library cannot read or write is only recorded
        (`read_refusal`, `write_refusal`), so that metadata work (snapshots, tags, expiry, orphans) works on
        every table."""
        bucket = count(options.get("bucket"), "bucket", minimum=None, default=-1)
        if bucket == 0 or bucket < -2:
            raise InvalidOptionError(f"bucket: {bucket} is not a bucket number (>= 1), -1 (dynamic) or -2 (postpone)")
        merge_engine = options.get("merge-engine", "deduplicate")
        deletion_vectors = _bool(options, "deletion-vectors.enabled", False)
        data_evolution = _bool(options, "data-evolution.enabled", False)
        row_tracking = _bool(options, "row-tracking.enabled", False)
        bucket_function = options.get("bucket-function.type", "default").strip().lower()
        directory = options.get("data-file.path-directory")
        data_directory = _relative_directory(directory) if directory is not None else None
        file_format = options.get("file.format", "parquet").lower()
        compression = options.get("file.compression", "zstd").lower()
        changelog_format = options.get("changelog-file.format", file_format).lower()
        changelog_compression = options.get("changelog-file.compression", compression).lower()
        per_level = {level: _codec(name.lower()) for level, name in
                     level_map(options.get("file.compression.per.level", ""), "file.compression.per.level",
                               "'0:lz4,1:zstd'").items()}
        formats_per_level = {level: name.lower() for level, name in
                             level_map(options.get("file.format.per.level", ""), "file.format.per.level",
                                       "'0:avro,3:parquet'").items()}
        changelog = options.get("changelog-producer", "none")
        if changelog not in CHANGELOG_PRODUCERS:
            raise InvalidOptionError(f"changelog-producer: unknown value {changelog!r} (one of "
                                     f"{', '.join(CHANGELOG_PRODUCERS)})")
        if changelog != "none" and not has_primary_key:
            raise InvalidOptionError(f"changelog-producer: {changelog!r} needs a primary-key table (as in Paimon); "
                                     "define primary keys or leave changelog-producer at 'none'")
        delta_commits = (count(options["full-compaction.delta-commits"], "full-compaction.delta-commits")
                         if "full-compaction.delta-commits" in options else None)
        if delta_commits is not None and changelog == "lookup":
            raise InvalidOptionError("full-compaction.delta-commits: incompatible with changelog-producer = 'lookup' "
                                     "(as in Paimon); use changelog-producer = 'full-compaction' for periodic full "
                                     "compaction with changelog, or remove full-compaction.delta-commits")
        bucket_key = options.get("bucket-key")
        seq_fields = _field_list(options, "sequence.field")
        kind = TableKind(
            has_primary_key=has_primary_key, bucket=bucket, has_bucket_key=bool(bucket_key and bucket_key.strip()),
            merge_engine=merge_engine, deletion_vectors=deletion_vectors, changelog=changelog,
            data_evolution=data_evolution, file_format=file_format, compression=compression,
            changelog_format=changelog_format, changelog_compression=changelog_compression,
            level_compressions=tuple(sorted(per_level.items())),
            level_formats=tuple(sorted(formats_per_level.items())),
            row_tracking=row_tracking, bucket_function=bucket_function,
            unsupported_directory=directory if directory is not None and data_directory is None else None)
        sort_order = str(options.get("sequence.field.sort-order", "ascending")).strip().lower()
        if sort_order not in ("ascending", "descending"):
            raise InvalidOptionError(f"sequence.field.sort-order: {sort_order!r} is not 'ascending' or 'descending'")
        expiry = ExpirePolicy.from_options(options)
        max_buckets = count(options.get("dynamic-bucket.max-buckets"), "dynamic-bucket.max-buckets", minimum=None,
                            default=-1)
        if max_buckets == 0 or max_buckets < -1:
            raise InvalidOptionError(f"dynamic-bucket.max-buckets: {max_buckets} is not -1 (unlimited) or a number of "
                                     "buckets (>= 1)")
        dv_merge_on_read = _bool(options, "deletion-vectors.merge-on-read", False)
        return cls(
            bucket=bucket,
            bucket_key=tuple(k.strip() for k in bucket_key.split(",")) if bucket_key else None,
            merge_engine=merge_engine,
            file_format=file_format,
            file_compression=_codec(compression),
            changelog_file_compression=_codec(changelog_compression),
            sequence_fields=seq_fields,
            sequence_descending=sort_order == "descending",
            rowkind_field=options.get("rowkind.field") or None,
            ignore_delete=_bool(options, next((k for k in IGNORE_DELETE_KEYS if k in options), "ignore-delete"),
                                False),
            ignore_update_before=_bool(options, "ignore-update-before", False),
            changelog_producer=changelog,
            changelog_row_deduplicate=_bool(options, "changelog-producer.row-deduplicate", False),
            changelog_row_deduplicate_ignore_fields=_field_list(options,
                                                                "changelog-producer.row-deduplicate-ignore-fields"),
            full_compaction_delta_commits=delta_commits,
            partition_default_name=options.get("partition.default-name", "__DEFAULT_PARTITION__"),
            partition_legacy_name=_bool(options, "partition.legacy-name", True),
            snapshot_num_retained_min=expiry.retain_min,
            snapshot_num_retained_max=expiry.retain_max,
            snapshot_time_retained=expiry.time_retained,
            snapshot_expire_limit=expiry.max_deletes,
            # Paimon: 128 MB for primary-key tables, 256 MB for append tables unless set.
            target_file_size=_parse_memory(options.get("target-file-size", "128 mb" if has_primary_key else "256 mb"),
                                           "target-file-size"),
            dynamic_bucket_target_row_num=count(options.get("dynamic-bucket.target-row-num"),
                                                "dynamic-bucket.target-row-num", default=2_000_000),
            dynamic_bucket_max_buckets=max_buckets,
            read_refusal=kind.refusal(writing=False),
            write_refusal=kind.refusal(writing=True),
            raw=dict(options),
            deletion_vectors=deletion_vectors,
            deletion_vectors_bitmap64=_bool(options, "deletion-vectors.bitmap64", False),
            deletion_vectors_merge_on_read=dv_merge_on_read,
            lookup_file_retention=duration(options.get("lookup.cache-file-retention", "1 h"),
                                           "lookup.cache-file-retention"),
            lookup_max_disk_size=(_parse_memory(options["lookup.cache-max-disk-size"], "lookup.cache-max-disk-size")
                                  if "lookup.cache-max-disk-size" in options else None),
            data_file_prefix=options.get("data-file.prefix", "data-"),
            changelog_file_prefix=options.get("changelog-file.prefix", "changelog-"),
            data_file_directory=data_directory,
            field_default_values={m.group(1): value for key, value in options.items()
                                  if (m := _DEFAULT_VALUE.fullmatch(key))},
            stats=StatsPolicy.from_options(options),
            write_only=_bool(options, "write-only", False),
            bucket_function=bucket_function,
            zstd_level=count(options.get("file.compression.zstd-level"), "file.compression.zstd-level",
                             minimum=None, default=1),
            compression_per_level=per_level,
        )


_DEFAULT_VALUE = re.compile(r"fields\.(.+)\.default-value")


def _relative_directory(text: str) -> str | None:
    """`data-file.path-directory` as a folder path below the table ("data", "a/b"), or None when it is empty,
    absolute, a URI or leaves the table through '..' (Paimon resolves those against the table path too)."""
    if "\\" in text or ":" in text or text.startswith("/"):
        return None
    parts = [p for p in text.split("/") if p not in ("", ".")]
    return "/".join(parts) if parts and ".." not in parts else None


def _codec(compression: str) -> str:
    return "none" if compression == "uncompressed" else compression


_MEMORY_UNITS = {"": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
                 "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def _parse_memory(text: str, option: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _MEMORY_UNITS:
        raise InvalidOptionError(f"{option}: {text!r} is not a memory size (examples: '128 mb', '1 gb')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]
