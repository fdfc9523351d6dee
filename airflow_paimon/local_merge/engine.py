"""One MERGE in this process: plan (checks, clause translation, which buckets and columns to read, how much
memory it takes), then join and evaluate bucket by bucket, write only the changed rows and commit once.

The semantics are the Spark application's (spark/merge/): rows are joined on the ``on`` columns (the source's
cast to the target's types), the first clause of each kind whose condition holds applies, ``sequence.field``
keeps an older source row from replacing a newer target row, a source key given twice is an error, and the
commit is exactly-once under (commit user, commit identifier). Nothing is written before every bucket was
evaluated, so bad input changes no byte.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_paimon.format import Snapshot, Split, Table
from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.commit import CommitId, Transaction
from airflow_paimon.format.deletion_vectors_append import require_append_vectors
from airflow_paimon.format.dynamic_bucket import DynamicBucketAssigner
from airflow_paimon.format.errors import MergeClauseError
from airflow_paimon.format.kernels import check_unique_keys, equal_runs
from airflow_paimon.format.read import read_split
from airflow_paimon.format.scan import DECODED_PER_FILE_BYTE, ScanPlanner
from airflow_paimon.format.versions import kinds_to_write
from airflow_paimon.merge import (
    NOT_MATCHED_BY_SOURCE,
    MergeClause,
    is_plain_upsert,
    normalize_on,
    parse_clauses,
    resolve_column,
    target_columns_needed,
    validate_clauses,
)

from .append_target import LOCATORS, append_commit_messages, duplicate_on_message, read_with_locators
from .clauses import CompiledMerge, compile_merge
from .translate import NotTranslatable

__all__ = ["DEFAULT_MEMORY_BUDGET", "LocalMerge", "describe_budget", "merge_in_process", "open_transaction",
           "plan_local_merge"]

DEFAULT_MEMORY_BUDGET = 2 << 30
"""Bytes a MERGE may take in this process (2 GiB): ``auto`` runs larger ones on Spark."""

def _duplicate_message(key: str, extra: int) -> str:
    return (f"the MERGE source has several rows for one target primary key ({key}; {extra} extra row(s) in the "
            "source). Can't execute this MERGE: a target row would match more than one source row. Nothing was "
            "committed.")


def _connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection that evaluates times in UTC, as the Spark application's session does, on one thread:
    the MERGE runs inside a worker whose other tasks share its cores."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET threads = 1")
    return con


@dataclass
class _Group:
    partition: tuple[Any, ...]
    bucket: int
    rows: pa.Table


@dataclass
class LocalMerge:
    """A MERGE planned in this process; `needed_bytes` estimates its peak memory, `run` does it."""

    table: Table
    tx: Transaction
    clauses: list[MergeClause]
    on: list[str]
    source: pa.Table
    target_columns: list[str]
    compiled: CompiledMerge
    groups: dict[tuple[tuple[Any, ...], int], pa.Table]
    splits: dict[tuple[tuple[Any, ...], int], Split]
    full: bool
    guard: list[str]
    started: float
    upsert: bool = False
    append: bool = False   # an append table with deletion vectors: every bucket joined at once (append_target.py)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def touched(self) -> list[tuple[tuple[Any, ...], int]]:
        if self.upsert:
            return []
        if self.append:
            return list(self.splits)
        keys = list(self.groups)
        if self.full:
            keys += [k for k in self.splits if k not in self.groups]
        return keys

    def split_bytes(self, key: tuple[tuple[Any, ...], int]) -> int:
        """The estimated in-memory size of the target columns read from one bucket."""
        split = self.splits.get(key)
        if split is None:
            return 0
        share = len(self.target_columns) / max(1, len(self.table.schema().field_names))
        return int(sum(f.file_size for f in split.files) * DECODED_PER_FILE_BYTE * share)

    @property
    def needed_bytes(self) -> int:
        """Peak memory: the source (held, joined and its output), the largest bucket read, and for NOT MATCHED
        BY SOURCE the rows every untouched bucket may contribute to the output."""
        per_bucket = [self.split_bytes(k) for k in self.touched]
        out = sum(per_bucket) if self.full or self.append else 0
        return 3 * self.source.nbytes + max(per_bucket, default=0) + out

    def run(self, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> dict[str, Any]:
        planned = time.monotonic()
        if self.upsert:
            return self._upsert(planned)
        if self.append:
            return self._append(planned)
        con = _connect()
        outputs: list[pa.Table] = []
        batch: list[pa.Table] = []
        batch_bytes = 0
        splits_read = rows_read = 0
        flush_at = max(1 << 20, memory_budget // 4)
        for key in self.touched:
            split = self.splits.get(key)
            target = self._read_target(split)
            if split is not None:
                splits_read += 1
                rows_read += target.num_rows
            joined = self._join(self.groups.get(key), target)
            if joined.num_rows:
                batch.append(joined)
                batch_bytes += joined.nbytes
            if batch_bytes >= flush_at:
                outputs.append(self.compiled.run(con, pa.concat_tables(batch)))
                batch, batch_bytes = [], 0
        if batch:
            outputs.append(self.compiled.run(con, pa.concat_tables(batch)))
        con.close()
        evaluated = time.monotonic()
        out = pa.concat_tables(outputs) if outputs else self.compiled.output.empty_table()
        kinds = out.column("__kind").combine_chunks()
        data = out.drop_columns(["__kind"])
        result, written, committed = self._commit(data, kinds, "the MERGE output", "merge")
        result.update(target_splits_read=splits_read, target_rows_read=rows_read,
                      target_columns_read=self.target_columns,
                      timings={"plan": round(planned - self.started, 3), "evaluate": round(evaluated - planned, 3),
                               "write": round(written - evaluated, 3), "commit": round(committed - written, 3)})
        if self.guard:
            result["sequence_guard"] = self.guard
        result.update(self.details)
        return result

    def _upsert(self, planned: float) -> dict[str, Any]:
        """A plain upsert, as the Spark application writes it: the source rows as new level-0 files, without
        reading the target (merge-on-read, the sequence field and the merge engine decide on read)."""
        logical = self.table.arrow_schema()
        names = self.source.column_names
        data = pa.table({f.name: self.source.column(resolve_column(names, f.name) or f.name).cast(f.type)
                         for f in logical})
        data, kinds = kinds_to_write(self.table.core_options, data, None)
        result, written, committed = self._commit(data, kinds, "the MERGE source", "upsert")
        result.update(target_splits_read=0, target_rows_read=0,
                      timings={"plan": round(planned - self.started, 3), "write": round(written - planned, 3),
                               "commit": round(committed - written, 3)})
        result.update(self.details)
        return result

    def _append(self, planned: float) -> dict[str, Any]:
        """The MERGE into an append table: the whole target joined once, the changed rows marked in their
        vectors and the new ones appended (append_target.py)."""
        target, files = read_with_locators(self.table, self.splits.values(), self.target_columns)
        con = _connect()
        try:
            out = self.compiled.run(con, self._join(self.source, target))
        finally:
            con.close()
        out = out.rename_columns(out.column_names[:-len(LOCATORS)] + LOCATORS)
        evaluated = time.monotonic()
        messages, rows = append_commit_messages(self.table, self.tx.base, out, files)
        written = time.monotonic()
        snap = self.tx.commit(messages) if messages else None
        committed = time.monotonic()
        result = self._result(snap, "merge", rows, committed)
        result.update(target_splits_read=len(self.splits), target_rows_read=target.num_rows,
                      target_columns_read=self.target_columns,
                      timings={"plan": round(planned - self.started, 3), "evaluate": round(evaluated - planned, 3),
                               "write": round(written - evaluated, 3), "commit": round(committed - written, 3)})
        result.update(self.details)
        return result

    def _result(self, snap: Snapshot | None, mode: str, rows: dict[str, int], committed: float) -> dict[str, Any]:
        base = self.tx.base
        return {
            "target": self.table.identifier, "commit_user": self.tx.commit_id.user if self.tx.commit_id else None,
            "commit_identifier": self.tx.commit_id.identifier if self.tx.commit_id else None,
            "status": "committed" if snap is not None else "no_changes",
            "snapshot_id": snap.id if snap is not None else (base.id if base is not None else None),
            "engine": "local", "mode": mode, "rows": rows, "seconds": round(committed - self.started, 3),
        }

    def _commit(self, data: pa.Table, kinds: pa.Array | None, what: str,
                mode: str) -> tuple[dict[str, Any], float, float]:
        """Write `data` (with its row kinds) and commit it once; the result's common part, and when the write
        and the commit ended."""
        if kinds is None:
            rows = {"inserted": data.num_rows, "updated": 0, "deleted": 0}
        else:
            counts = np.bincount(kinds.to_numpy(zero_copy_only=False).astype(np.int64), minlength=4)
            rows = {"inserted": int(counts[0]), "updated": int(counts[2]), "deleted": int(counts[1] + counts[3])}
        messages = self.table.new_write().write(data, kinds, base_snapshot=self.tx.base, duplicates="error",
                                                what=what) if data.num_rows else []
        written = time.monotonic()
        snap = self.tx.commit(messages) if messages else None
        committed = time.monotonic()
        return self._result(snap, mode, rows, committed), written, committed

    def _read_target(self, split: Split | None) -> pa.Table:
        logical = self.table.arrow_schema()
        if split is None:
            return pa.schema([pa.field(c, logical.field(c).type) for c in self.target_columns]).empty_table()
        return read_split(self.table, split, self.target_columns)

    def _join(self, src: pa.Table | None, target: pa.Table) -> pa.Table:
        """Joined rows: source columns ``__s_<i>``, target columns ``__t_<i>``, ``__has_s``/``__has_t``."""
        if src is None:
            src = self.source.schema.empty_table()
        n_s, n_t = src.num_rows, target.num_rows
        ji: pa.Array
        jt: pa.Array
        if n_t == 0 and not self.full:
            ji, jt = pa.array(np.arange(n_s, dtype=np.int64)), pa.nulls(n_s, pa.int64())
        elif n_s == 0 and self.full:
            ji, jt = pa.nulls(n_t, pa.int64()), pa.array(np.arange(n_t, dtype=np.int64))
        else:
            left = src.select(self.on).append_column("__is", pa.array(np.arange(n_s, dtype=np.int64)))
            right = target.select(self.on).append_column("__it", pa.array(np.arange(n_t, dtype=np.int64)))
            j = right.join(left, self.on, join_type="full outer" if self.full else "right outer",
                           use_threads=False)
            ji, jt = j.column("__is").combine_chunks(), j.column("__it").combine_chunks()
        s_rows = src.take(cast(pa.Int64Array, ji))
        t_rows = target.take(cast(pa.Int64Array, jt))
        cols: dict[str, Any] = {f"__s_{i}": s_rows.column(i) for i in range(src.num_columns)}
        cols.update({f"__t_{i}": t_rows.column(i) for i in range(target.num_columns)})
        cols["__has_s"] = pc.is_valid(ji)
        cols["__has_t"] = pc.is_valid(jt)
        return pa.table(cols)


def open_transaction(table: Table, commit_user: str | None, commit_identifier: int | None) -> Transaction:
    """The MERGE's commit; its writes go through the library's TableWrite, which writes the changelog the
    table's producer asks for (input, lookup), so the commit declares that producer."""
    return table.transaction(commit_id=CommitId.of(commit_user, commit_identifier), commit_user=commit_user,
                             changelog=table.core_options.changelog_producer)


def plan_local_merge(table: Table, source: pa.Table, clauses: Any = None, on: Any = None, *,
                     tx: Transaction, honour_sequence_field: bool = True) -> LocalMerge:
    """Check and plan the MERGE of `source` into `table` on `tx`'s base (nothing is read of the target yet).

    MergeClauseError / StoreAssignmentError / DuplicateKeyError for bad input; NotTranslatable for clauses or
    tables only Spark handles."""
    started = time.monotonic()
    append = not table.is_primary_key
    if append:
        require_append_vectors(table, "a MERGE into")
    if append and not on:
        raise MergeClauseError(f"a MERGE into the append table {table.identifier} needs `on`: the columns whose "
                               "equal values match a source row with target rows (it has no primary key)")
    if table.core_options.bucket < 1 and not table.is_dynamic_bucket and not append:
        raise NotTranslatable(f"{table.identifier} has bucket={table.core_options.bucket}: the in-process MERGE "
                              "handles fixed-bucket and dynamic-bucket tables; run this MERGE on Spark")
    names = table.schema().field_names
    logical = table.arrow_schema()
    on_cols = normalize_on(on, table.primary_keys, names)
    parsed = parse_clauses(clauses)
    validate_clauses(parsed, target_columns=names, primary_keys=table.primary_keys, on=on_cols,
                     source_columns=source.column_names)
    # The join columns, as Spark casts and names them.
    src_cols = list(source.column_names)
    for k in on_cols:
        real = resolve_column(src_cols, k)
        assert real is not None   # validate_clauses checked it
        i = src_cols.index(real)
        source = source.set_column(i, k, source.column(i).cast(logical.field(k).type))
        src_cols[i] = k
    seq = list(table.core_options.sequence_fields)
    guard = seq if honour_sequence_field and seq and all(resolve_column(src_cols, f) for f in seq) else []
    # An append target's updates write whole rows, and its rows carry where they are (append_target.py).
    tcols = names if append else target_columns_needed(names, table.primary_keys, parsed, on_cols, guard,
                                                       delete_reads=names)
    s_map = {c: f"__s_{i}" for i, c in enumerate(src_cols)}
    t_map = {c: f"__t_{i}" for i, c in enumerate(tcols)}
    locators = [pa.field(f"__t_{len(tcols) + i}", t) for i, t in enumerate((pa.int32(), pa.int64()))] \
        if append else []
    joined_schema = pa.schema([pa.field(f"__s_{i}", f.type) for i, f in enumerate(source.schema)] +
                              [pa.field(f"__t_{i}", logical.field(c).type) for i, c in enumerate(tcols)] +
                              locators + [pa.field("__has_s", pa.bool_()), pa.field("__has_t", pa.bool_())])
    guard_cols = [(s_map[resolve_column(src_cols, f) or f], t_map[f]) for f in guard]
    con = _connect()
    try:
        compiled = compile_merge(con, table, parsed, joined_schema, s_map, t_map, guard_cols,
                                 passthrough=[f.name for f in locators])
    finally:
        con.close()
    if append:
        # Only a source row that can match (no NULL in `on`) can match a target row twice.
        keys = source.select(on_cols)
        keys = keys.filter(functools.reduce(pc.and_, [pc.is_valid(c) for c in keys.columns]))
        check_unique_keys(keys, on_cols, duplicate_on_message)
    else:
        check_unique_keys(source.select(table.primary_keys), table.primary_keys, _duplicate_message)
    base = tx.base
    groups = {} if append else _bucket_groups(table, source, base)
    splits: dict[tuple[tuple[Any, ...], int], Split] = {}
    if base is not None:
        for sp in ScanPlanner(table).plan(table.file_entries(base), None, base.id):
            splits[(sp.partition, sp.bucket)] = sp
    full = any(c.when == NOT_MATCHED_BY_SOURCE for c in parsed)
    upsert = not append and is_plain_upsert(parsed) and set(on_cols) == set(table.primary_keys)
    return LocalMerge(table, tx, parsed, on_cols, source, tcols, compiled, groups, splits, full, guard, started,
                      upsert, append)


def _bucket_groups(table: Table, source: pa.Table,
                   base: Snapshot | None) -> dict[tuple[tuple[Any, ...], int], pa.Table]:
    """The source rows of each (partition, bucket), bucketed as the library's writer buckets them on `base` (a
    dynamic-bucket table's keys by its HASH index: a key the target holds is in the bucket its rows are in)."""
    logical = table.arrow_schema()
    pkeys = table.partition_keys
    parts = {p: source.column(resolve_column(source.column_names, p) or p).cast(logical.field(p).type) for p in pkeys}
    if table.is_dynamic_bucket:
        trimmed = table.schema().trimmed_primary_keys
        keys = pa.table({**parts, **{k: source.column(k).cast(logical.field(k).type) for k in trimmed}})
        buckets = pa.array(DynamicBucketAssigner(table, base).assign_rows(keys), pa.int32())
    else:
        keys = pa.table({k: source.column(k).cast(logical.field(k).type) for k in table.bucket_keys})
        buckets = pa.array(bucket_ids(keys, table.core_options.bucket, table.core_options.bucket_function),
                           pa.int32())
    keyed = pa.table({**parts, "__bucket": buckets})
    order = pc.sort_indices(keyed, sort_keys=[(c, "ascending") for c in keyed.column_names])
    keyed, data = keyed.take(order), source.take(order)
    groups = {}
    for start, end in equal_runs([keyed.column(c) for c in keyed.column_names], keyed.num_rows):
        partition = tuple(keyed.column(p)[start].as_py() for p in pkeys)
        groups[(partition, int(keyed.column("__bucket")[start].as_py()))] = data.slice(start, end - start)
    return groups


def merge_in_process(table: Table, source: pa.Table, clauses: Any = None, on: Any = None, *,
                     commit_user: str | None = None, commit_identifier: int | None = None,
                     honour_sequence_field: bool = True,
                     memory_budget: int = DEFAULT_MEMORY_BUDGET) -> dict[str, Any]:
    """MERGE `source` (Arrow) into `table` in this process and commit once; the result as the Spark
    application reports it (status, snapshot_id, rows, what was read), with ``engine: "local"``.

    With `commit_user` and `commit_identifier`, a merge whose commit already landed does nothing
    (``status: "already_committed"``)."""
    tx = open_transaction(table, commit_user, commit_identifier)
    existing = tx.already_committed
    if existing is not None:
        return {"target": table.identifier, "commit_user": commit_user, "commit_identifier": commit_identifier,
                "status": "already_committed", "snapshot_id": existing.id, "engine": "local",
                "message": f"commit {commit_user!r}/{commit_identifier} is already in snapshot {existing.id} of "
                           f"{table.identifier}; nothing to do"}
    plan = plan_local_merge(table, source, clauses, on, tx=tx, honour_sequence_field=honour_sequence_field)
    return plan.run(memory_budget)


def describe_budget(plan: LocalMerge, memory_budget: int) -> str:
    return (f"needs about {plan.needed_bytes / (1 << 20):.0f} MiB (source {plan.source.nbytes / (1 << 20):.0f} MiB, "
            f"{len(plan.touched)} target bucket(s) read) of the {memory_budget / (1 << 20):.0f} MiB budget")



