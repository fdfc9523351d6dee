"""Turning Arrow rows into data files and commit messages, locally or in another process.

`TableWrite.write` does everything for one batch in this process. Distributed writers (Spark tasks) call
`TableWrite.write_bucket` with the rows of one bucket and the first sequence number the driver handed them, and
send the returned `CommitMessage.to_dict()` back to the driver, which commits them all at once.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .bucketing import bucket_ids
from .changelog.input import input_changelog
from .changelog.lookup import Lookup, level_up, lookup_changelog
from .commit import required_changelog
from .commit_message import CommitMessage
from .data_file import DELETE, INSERT, EncodedFile, kv_dictionary_columns, write_append_file, write_kv_file
from .deletion_vectors_append import delete_matching, update_matching
from .deletion_vectors_write import DeletionVectorWriter
from .dynamic_bucket import DynamicBucketAssigner
from .errors import DuplicateKeyError, InvalidDataError, SchemaMismatchError
from .kernels import key_text, last_of_each_key
from .schema import SEQUENCE_NUMBER, VALUE_KIND
from .versions import kinds_to_write, version_sort_indices

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .table import Table

T = TypeVar("T")


def conform(table: "Table", data: pa.Table | pa.RecordBatch, required: Sequence[str] | None = None) -> pa.Table:
    """`data` cast to the table's schema; columns missing from `data` are an error unless not `required`."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    target = table.schema().logical_arrow_schema()
    unknown = [n for n in data.column_names if n not in target.names]
    if unknown:
        raise SchemaMismatchError(f"columns {unknown} are not in the table schema {target.names}")
    need = target.names if required is None else list(required)
    missing = [n for n in need if n not in data.column_names]
    if missing:
        raise SchemaMismatchError(f"columns {missing} are missing from the data (table schema: {target.names})")
    arrays = []
    for f in target:
        if f.name in data.column_names:
            col = data.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatchError(
                        f"column {f.name!r}: cannot store {col.type} in a {f.type} column ({e})") from None
            if not f.nullable and col.null_count:
                kind = "primary key" if f.name in table.schema().primary_keys else "NOT NULL"
                raise InvalidDataError(f"column {f.name!r} is {kind} but {col.null_count} row(s) are null")
        else:
            col = pa.nulls(data.num_rows, f.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in target]))


def _group_ids(table: "Table", data: pa.Table, buckets: np.ndarray | None, num_buckets: int = 0) -> np.ndarray:
    """One int64 per row, equal exactly for rows of the same (partition, bucket); buckets lie in [0, num_buckets)."""
    gid = np.zeros(data.num_rows, dtype=np.int64)
    for name in table.schema().partition_keys:
        # The stubs type dictionary_encode as returning its argument's type; it returns a dictionary array.
        enc = cast(pa.DictionaryArray, pc.dictionary_encode(data.column(name)).combine_chunks())
        codes = enc.indices.to_numpy(zero_copy_only=False)
        codes = np.where(enc.indices.is_null().to_numpy(zero_copy_only=False), len(enc.dictionary), codes)
        gid = gid * (len(enc.dictionary) + 1) + codes
    if buckets is not None:
        gid = gid * num_buckets + buckets
    return gid


def _partition_rows(gid: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The rows of each group (partition, bucket) as (group id, ascending row indices), groups in id order.

    A stable sort on the group id alone: a radix sort when ids fit 16 bits (buckets of an unpartitioned table),
    several times faster than sorting whole rows by (group, key)."""
    if len(gid) == 0:
        return []
    small = gid.max() < 2**16
    order = np.argsort(gid.astype(np.uint16) if small else gid, kind="stable")
    gid_sorted = gid[order]
    cuts = np.flatnonzero(gid_sorted[1:] != gid_sorted[:-1]) + 1
    starts = np.concatenate([[0], cuts]).tolist()
    ends = np.concatenate([cuts, [len(gid_sorted)]]).tolist()
    return [(int(gid_sorted[a]), order[a:b]) for a, b in zip(starts, ends)]


def _order_group(data: pa.Table, rows: np.ndarray, keys: Sequence[str], seq_fields: Sequence[str] = (),
                 seq_descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One group's rows ordered by key (then sequence fields in Paimon's order), stable so that of duplicate keys
    the newest stays last; and the mask of the newest row of each key in that order."""
    col = data.column(keys[0])
    if not seq_fields and len(keys) == 1 and pa.types.is_integer(col.type) and col.null_count == 0:
        k = col.to_numpy()[rows]
        if len(k) < 2 or bool(np.all(k[1:] > k[:-1])):
            # Rows that arrive in key order (an ordered extract, a single bucket of sorted keys) need no sort:
            # one comparison pass instead of an O(n log n) argsort.
            return rows, np.ones(len(rows), dtype=bool)
        # The fast unstable sort is exact when keys are unique; duplicates (rare: one batch updating a key
        # twice) take a stable sort.
        order = np.argsort(k)
        ordered = k[order]
        differs = ordered[1:] != ordered[:-1]
        if not differs.all():
            order = np.argsort(k, kind="stable")
            ordered = k[order]
            differs = ordered[1:] != ordered[:-1]
        keep = np.ones(len(rows), dtype=bool)
        keep[:-1] = differs
        return rows[order], keep
    sub = data.select([*keys, *seq_fields]).take(pa.array(rows))
    order = version_sort_indices(sub, keys, seq_fields, seq_descending)
    keep = last_of_each_key([sub.column(k).take(order) for k in keys], len(rows))
    return rows[order], keep


class TableWrite:
    def __init__(self, table: "Table"):
        table.require_writable()
        self.table = table
        self.schema = table.schema()

    # ---- whole batches in this process -----------------------------------------------------------
    def write(self, data: pa.Table | pa.RecordBatch, kinds: pa.Array | None = None,
              base_snapshot: Snapshot | None = None,
              required: Sequence[str] | None = None, *, duplicates: str = "last",
              what: str = "the data") -> list[CommitMessage]:
        """Files for `data` (kinds: per-row RowKind, default +I) against `base_snapshot`'s sequence numbers.

        Several rows with one primary key: the newest wins (``duplicates="last"``, a stream of changes: the
        highest `sequence.field` values in Paimon's order, then the later row), or DuplicateKeyError before any
        file is written (``"error"``: a MERGE source, where they are ambiguous); `what` names the rows in that
        message. Without `kinds`, a table with `rowkind.field` takes each row's kind from that column; with
        `ignore-delete` (`ignore-update-before`) retractions (-U rows) are not written.
        """
        if duplicates not in ("last", "error"):
            raise ValueError(f"duplicates must be 'last' or 'error', not {duplicates!r}")
        data = conform(self.table, data, required)
        data, kinds = kinds_to_write(self.table.core_options, data, kinds, not self.table.is_primary_key)
        if data.num_rows == 0:
            return []
        if not self.table.is_primary_key:
            return self._write_append(data, base_snapshot)
        kinds = pa.array(np.full(data.num_rows, INSERT, dtype=np.int8)) if kinds is None else kinds
        data = data.append_column("__kind", kinds)
        assigner = None
        if self.table.is_dynamic_bucket:
            assigner = DynamicBucketAssigner(
                self.table, base_snapshot if base_snapshot is not None else self.table.latest_snapshot())
            buckets = assigner.assign_rows(data)
        else:
            buckets = bucket_ids(data.select(self.table.bucket_keys), self.table.core_options.bucket,
                                 self.table.core_options.bucket_function)
        num_buckets = int(buckets.max()) + 1
        gid = _group_ids(self.table, data, buckets, num_buckets)
        keys = self.schema.trimmed_primary_keys
        options = self.table.core_options
        # Rows are split by group first, then each group is sorted by key in its own thread (numpy's and Arrow's
        # sorts release the GIL), as its rows are taken and written below: the work spreads over the cores.
        groups = _partition_rows(gid)
        ordered = self._run(_order_group, [(data, rows, keys, options.sequence_fields, options.sequence_descending)
                                           for _, rows in groups])
        if duplicates == "error":
            for rows, keep in ordered:
                if not keep.all():
                    dropped = sum(int((~k).sum()) for _, k in ordered)
                    key = key_text(data, self.schema.primary_keys, int(rows[np.flatnonzero(~keep)[0]]))
                    raise DuplicateKeyError(
                        f"{what} has {dropped} more row(s) than distinct primary keys (first duplicate: {key}); "
                        "each key may appear once. Nothing was committed.")
        next_seq = self.table.next_sequence_numbers(base_snapshot)
        lookup = dv = None
        # Not on a write-only table: its writes leave their files at level 0 for its compaction.
        looks_up = required_changelog(options, "APPEND") == "lookup"
        if looks_up or options.writes_settle_vectors:
            base = base_snapshot if base_snapshot is not None else self.table.latest_snapshot()
            lookup = Lookup(self.table, base) if looks_up else None
            dv = DeletionVectorWriter(self.table, base) if options.writes_settle_vectors else None
        jobs = []
        for (group, _), (rows, keep) in zip(groups, ordered):
            partition = tuple(data.column(k)[int(rows[0])].as_py() for k in self.schema.partition_keys)
            bucket = group % num_buckets
            jobs.append((data, rows, keep, partition, bucket, next_seq.get((partition, bucket), 0), lookup, dv))
        messages = self._run(self._write_group, jobs)
        if assigner is not None:
            # A bucket whose hashes grew gets its new index file in its own message (Paimon's DataIncrement), in
            # place of its previous one.
            index_files = assigner.index_files()
            for msg in messages:
                got = index_files.get((msg.partition, msg.bucket))
                if got is not None:
                    new, previous = got
                    msg.index_adds.append(new)
                    if previous is not None:
                        msg.index_deletes.append(previous)
        return messages

    def _write_group(self, data: pa.Table, rows: np.ndarray, kept: np.ndarray, partition: tuple, bucket: int,
                     seq0: int, lookup: Lookup | None, dv: DeletionVectorWriter | None) -> CommitMessage:
        """One bucket's rows (`rows`: their indices in `data`, sorted by key; `kept`: the newest of each key)."""
        written = rows if kept.all() else rows[kept]
        # Consecutive rows (sorted input of one bucket) are a zero-copy slice; otherwise a gather.
        contiguous = len(written) > 0 and int(written[-1]) - int(written[0]) + 1 == len(written) \
            and bool(np.all(np.diff(written) == 1))
        part = data.slice(int(written[0]), len(written)) if contiguous else data.take(written)
        if self.table.core_options.changelog_producer == "input":
            # Every input row has its own sequence number (and is in the changelog); the newest one per key is
            # stored with its number, so later writes still order after all of them.
            seq_all = np.arange(seq0, seq0 + len(rows), dtype=np.int64)
            sequence = seq_all[kept] if not kept.all() else seq_all
            every = part if written is rows else data.take(rows)
            changelog = every.drop_columns(["__kind"]).append_column(SEQUENCE_NUMBER, pa.array(seq_all)) \
                .append_column(VALUE_KIND, every.column("__kind"))
        else:
            sequence = np.arange(seq0, seq0 + len(written), dtype=np.int64)
            changelog = None
        return self._write_with_changelog(partition, bucket, part.drop_columns(["__kind"]), part.column("__kind"),
                                          sequence, changelog, lookup, dv)

    def _write_with_changelog(self, partition: tuple, bucket: int, rows: pa.Table, kinds: pa.ChunkedArray,
                              sequence: np.ndarray, changelog: pa.Table | None, lookup: Lookup | None,
                              dv: DeletionVectorWriter | None = None) -> CommitMessage:
        """One bucket's data file and, as the table's changelog-producer asks, its changelog: the input rows
        (input), or the looked-up changes plus the move of the new file out of level 0 (lookup); on a
        deletion-vector table, the move of the new file out of level 0 with the vectors it makes."""
        kind_codes = kinds.combine_chunks().cast(pa.int8())
        # the changelog holds versions of the data file's rows: the data file's encodings suit it
        dictionary = None if changelog is None and lookup is None else \
            kv_dictionary_columns(self.schema, rows, kind_codes)
        # a lookup changelog reuses the encoded columns of the data file (changelog/lookup.py)
        data_file: list[EncodedFile] | None = [] if lookup is not None else None
        msg = self.write_bucket(partition, bucket, rows, kind_codes, int(sequence[0]), sequence=pa.array(sequence),
                                dictionary=dictionary, keep=data_file)
        if dv is not None:
            dv.settle(partition, msg)
        if changelog is not None:
            msg.changelog_files = input_changelog(self.table, partition, bucket, changelog, dictionary)
        if lookup is not None:
            versions = rows.append_column(SEQUENCE_NUMBER, pa.array(sequence)).append_column(VALUE_KIND, kind_codes)
            msg.compact_changelog = lookup_changelog(self.table, lookup, partition, bucket, versions, dictionary,
                                                     data_file[0] if data_file else None)
            if dv is None:   # on a deletion-vector table `settle` moved the rows up already, marking the vectors
                msg.compact_before, msg.compact_after = level_up(self.table, lookup, partition, bucket,
                                                                 msg.new_files[0])
        return msg

    @staticmethod
    def _run(work: Callable[..., T], jobs: list[tuple]) -> list[T]:
        """Work on buckets in parallel: sorting, taking and Parquet encoding release the GIL."""
        if len(jobs) <= 1:
            return [work(*job) for job in jobs]
        with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 2)) as pool:
            return list(pool.map(lambda job: work(*job), jobs))

    def _write_append(self, data: pa.Table, base_snapshot: Snapshot | None) -> list[CommitMessage]:
        """Append rows: one file per partition, or per (partition, bucket) of a bucketed append table, whose rows
        go to the bucket Paimon gives them (the hash of the `bucket-key` columns, as for primary keys)."""
        pkeys = self.schema.partition_keys
        next_seq = self.table.next_sequence_numbers(base_snapshot)
        num_buckets = self.table.core_options.bucket
        buckets = bucket_ids(data.select(self.table.bucket_keys), num_buckets,
                             self.table.core_options.bucket_function) if num_buckets >= 1 else None
        if not pkeys and buckets is None:
            return [self.write_bucket((), 0, data, None, next_seq.get(((), 0), 0))]
        gid = _group_ids(self.table, data, buckets, num_buckets)
        jobs = []
        for group, rows in _partition_rows(gid):
            part = data.take(pa.array(rows))
            partition = tuple(part.column(k)[0].as_py() for k in pkeys)
            bucket = 0 if buckets is None else group % num_buckets
            jobs.append((partition, bucket, part, None, next_seq.get((partition, bucket), 0)))
        return self._run(self.write_bucket, jobs)

    # ---- one bucket (also from other processes) -----------------------------------------------------
    def write_bucket(self, partition: tuple, bucket: int, rows: pa.Table, kinds: pa.Array | pa.ChunkedArray | None,
                     first_sequence: int, level: int = 0, file_source: int = 0, *,
                     sequence: pa.Array | None = None, dictionary: Sequence[str] | None = None,
                     keep: list[EncodedFile] | None = None) -> CommitMessage:
        """Write rows of one (partition, bucket); primary-key rows must be sorted by key and unique per key.
        Their sequence numbers count up from `first_sequence` unless given (`sequence`, increasing);
        `dictionary`: see `write_kv_file`."""
        table = self.table
        bucket_dir = table.bucket_dir(partition, bucket)
        if table.is_primary_key:
            n = rows.num_rows
            if kinds is None:
                kinds = pa.array(np.full(n, INSERT, dtype=np.int8))
            seq = sequence if sequence is not None else pa.array(np.arange(first_sequence, first_sequence + n,
                                                                             dtype=np.int64))
            if isinstance(kinds, pa.ChunkedArray):
                kinds = kinds.combine_chunks()
            meta = write_kv_file(table.io, bucket_dir, self.schema, rows, seq, kinds.cast(pa.int8()),
                                 table.core_options.data_codec(level), prefix=table.core_options.data_file_prefix,
                                 stats=table.core_options.stats, level=level, file_source=file_source,
                                 dictionary=dictionary, keep=keep)
        else:
            meta = write_append_file(table.io, bucket_dir, self.schema, rows, first_sequence,
                                     table.core_options.data_codec(None),
                                     prefix=table.core_options.data_file_prefix, stats=table.core_options.stats,
                                     file_source=file_source)
        return CommitMessage(table.partition_codec.to_bytes(partition), bucket, table.total_buckets, [meta])

    def delete_rows(self, keys: pa.Table, base_snapshot: Snapshot | None = None) -> list[CommitMessage]:
        """-D rows for the given primary keys (other columns may be absent); on an append table with deletion
        vectors, every row equal to one of `keys` in its columns is marked deleted in its file's vector."""
        if not self.table.is_primary_key:
            return delete_matching(self.table, keys, base_snapshot)
        pk = list(self.schema.primary_keys)
        missing = [k for k in pk if k not in keys.column_names]
        if missing:
            raise SchemaMismatchError(f"delete needs every primary-key column; missing {missing}")
        if self.table.core_options.ignore_delete:
            raise InvalidDataError(f"{self.table.identifier} has ignore-delete = true: its writers drop deletes, so "
                                   "deleting keys would change nothing")
        kinds = pa.array(np.full(keys.num_rows, DELETE, dtype=np.int8))
        return self.write(keys, kinds, base_snapshot, required=pk)

    def update_rows(self, rows: pa.Table, on: Sequence[str],
                    base_snapshot: Snapshot | None = None) -> list[CommitMessage]:
        """Append-table update with deletion vectors: the rows equal to one of `rows` in the `on` columns are marked
        deleted and `rows` appended (as Paimon's UPDATE of such a table)."""
        return update_matching(self.table, rows, on, base_snapshot, lambda: self.write(rows, None, base_snapshot))
