"""What decides whether this library reads and writes a table exactly as Paimon does, and why not when it does not.

A table is opened whatever its options, so that metadata work (snapshots, tags, expiry, orphans) runs on every
table; a read or a write this library would get wrong is refused before any I/O, with the reasons given here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bucket_functions import BUCKET_FUNCTIONS

__all__ = ["COMPRESSIONS", "TableKind"]

COMPRESSIONS = {"zstd", "snappy", "gzip", "lz4", "none", "uncompressed", "brotli"}


@dataclass(frozen=True)
class TableKind:
    """The options of a table that this library either follows or must refuse."""

    has_primary_key: bool
    bucket: int
    has_bucket_key: bool
    merge_engine: str
    deletion_vectors: bool
    changelog: str
    data_evolution: bool
    file_format: str
    compression: str
    changelog_format: str
    changelog_compression: str
    row_tracking: bool
    bucket_function: str
    unsupported_directory: str | None
    # file.compression.per.level / file.format.per.level: (level, codec or format) pairs
    level_compressions: tuple[tuple[int, str], ...] = ()
    level_formats: tuple[tuple[int, str], ...] = ()

    def refusal(self, writing: bool) -> str | None:
        """Why rows read (or files written) here would not be what Paimon reads (or writes); None: exact."""
        limits = self._read_limits() + (self._write_limits() if writing else [])
        return "; ".join(limits) if limits else None

    def _read_limits(self) -> list[str]:
        out = []
        if self.bucket == -2:
            out.append("it is a postpone-bucket table (bucket = -2): its new rows wait in bucket-postpone until "
                       "Paimon's compaction assigns them buckets")
        if self.has_primary_key and self.merge_engine != "deduplicate":
            out.append(f"its merge-engine is {self.merge_engine!r} (only 'deduplicate' is supported here)")
        if self.data_evolution:
            out.append("it is a data-evolution table (data-evolution.enabled = true): its files hold some columns "
                       "each, joined by row id")
        if self.file_format != "parquet":
            out.append(f"its file.format is {self.file_format!r} (only 'parquet' is supported here)")
        if self.unsupported_directory is not None:
            out.append(f"its data-file.path-directory {self.unsupported_directory!r} is not a folder inside the "
                       "table (only a relative path without '..' is supported here)")
        return out

    def _write_limits(self) -> list[str]:
        out = []
        if self.deletion_vectors:
            # Reads of deletion-vector tables are exact; writes keep the vectors up to date for deduplicate
            # primary-key tables (deletion_vectors_write.py) and for append tables, whose deletes and updates
            # mark rows in them (deletion_vectors_append.py).
            if self.changelog == "full-compaction":
                # Paimon refuses this pair when the table is created (SchemaValidation).
                out.append("it is a deletion-vector table with changelog-producer = 'full-compaction', which Paimon "
                           "does not allow: deletion vectors go with changelog-producer none, input or lookup")
        if self.bucket_function not in BUCKET_FUNCTIONS:
            # A key written here by another function than the table's would exist in two buckets.
            out.append(f"its bucket-function.type is {self.bucket_function!r} (Paimon's are "
                       f"{', '.join(BUCKET_FUNCTIONS)})")
        if self.row_tracking:
            # Paimon gives each new file the next row ids at commit (firstRowId, the snapshot's nextRowId), and
            # keeps them through compaction: files written here would carry none.
            out.append("it is a row-tracking table (row-tracking.enabled = true): Paimon numbers the rows of each "
                       "new file at commit, which this library does not do")
        if self.has_primary_key and self.bucket == -1 and self.has_bucket_key:
            # Paimon refuses such a table at creation: a dynamic bucket is chosen by the HASH index, not a key.
            out.append("it is a dynamic-bucket primary-key table (bucket = -1) with a bucket-key: remove bucket-key "
                       "or give the table a fixed bucket number")
        if not self.has_primary_key and self.bucket >= 1 and not self.has_bucket_key:
            # Paimon refuses such a table at creation: without a bucket key it cannot tell where a row goes.
            out.append(f"it is a bucketed append table (bucket = {self.bucket}) without a bucket-key: set "
                       "bucket-key to the columns whose hash picks each row's bucket")
        if self.compression not in COMPRESSIONS:
            out.append(f"its file.compression {self.compression!r} is not a codec this library writes "
                       f"({', '.join(sorted(COMPRESSIONS))})")
        if self.has_primary_key:
            # (Paimon's append writers take file.compression and file.format whatever the level)
            for level, codec in self.level_compressions:
                if codec not in COMPRESSIONS:
                    out.append(f"its file.compression.per.level gives level {level} the codec {codec!r}, which is "
                               f"not one this library writes ({', '.join(sorted(COMPRESSIONS))})")
            for level, file_format in self.level_formats:
                if file_format != "parquet":
                    out.append(f"its file.format.per.level gives level {level} the format {file_format!r} (only "
                               "'parquet' files are written here)")
        if self.changelog != "none":
            # The changelog files its producer writes: Parquet only, like the data files.
            if self.changelog_format != "parquet":
                out.append(f"its changelog-file.format is {self.changelog_format!r} (only 'parquet' changelog "
                           "files are written here)")
            if self.changelog_compression not in COMPRESSIONS:
                out.append(f"its changelog-file.compression {self.changelog_compression!r} is not a codec this "
                           f"library writes ({', '.join(sorted(COMPRESSIONS))})")
        return out
