"""One MERGE from start to commit: find an earlier landing of the commit, pick the way to merge, commit once."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import pyarrow as pa
from pyspark.sql import SparkSession

from airflow_paimon.format import Catalog, Table
from airflow_paimon.format.commit import CommitId, Transaction
from airflow_paimon.format.deletion_vectors_append import require_append_vectors
from airflow_paimon.format.errors import InvalidOptionError, UnsupportedTableError
from airflow_paimon.local_merge.engine import plan_local_merge
from airflow_paimon.local_merge.translate import NotTranslatable
from airflow_paimon.merge import NOT_MATCHED_BY_SOURCE, is_plain_upsert, normalize_on

from ..common import reapply_identifier
from ..schema_map import spark_schema
from .driver_upsert import upsert_small_local_source
from .feed import (
    feed_transaction,
    feed_written,
    is_change_feed,
    mirrors,
    open_feed,
    reduce_feed,
    settled_feed_merge,
    write_feed_in_driver,
)
from .general import general_merge
from .plan import merge_clauses, plan_merge
from .result import MergeResult, Written
from .source import load_source
from .spec import MergeSpec
from .upsert import upsert_on_spark

__all__ = ["merge_into", "run_merge"]


def _open_commit(spec: MergeSpec, table: Table) -> tuple[Transaction, int | None, MergeResult | None]:
    """The transaction of this merge and its commit identifier, or the result saying it already landed (then
    there is nothing to do).

    With `reapply`, a commit that already landed is merged again under a new identifier derived from the
    `reapply_token` (default: now), which is looked for too, so that retrying a re-application is still
    exactly-once."""
    user, ident = spec.commit_user, spec.commit_identifier
    # Every way of merging writes the changelog the target's producer asks for (tables/changelog.py).
    producer = table.core_options.changelog_producer
    tx = table.transaction(commit_id=CommitId.of(user, ident), commit_user=user, changelog=producer)
    existing = tx.already_committed
    if existing is not None and not spec.reapply:
        return tx, ident, MergeResult.already_committed(
            table.identifier, user, ident, existing.id,
            f"commit {user!r}/{ident} is already in snapshot {existing.id} of {table.identifier}; nothing to do "
            "(reapply=True merges again)")
    if tx.commit_id is not None and spec.reapply:
        token = spec.reapply_token if spec.reapply_token is not None else time.time_ns()
        if existing is not None or spec.reapply_token is not None:
            ident = reapply_identifier(tx.commit_id.identifier, token)
            tx = table.transaction(commit_id=CommitId(tx.commit_id.user, ident), changelog=producer)
            again = tx.already_committed
            if again is not None:
                return tx, ident, MergeResult.already_committed(
                    table.identifier, user, ident, again.id,
                    f"the re-applied commit {user!r}/{ident} is already in snapshot {again.id}; nothing to do")
    return tx, ident, None


def merge_into(spark: SparkSession | Callable[[], SparkSession], spec: MergeSpec | Mapping[str, Any]) -> MergeResult:
    """Run one MERGE (see the package's description).

    `spark` may be a function returning the session, so that a merge that needs no Spark job never starts one.
    """
    started = time.monotonic()
    if not isinstance(spec, MergeSpec):
        spec = MergeSpec.from_dict(spec)
    catalog = Catalog(spec.warehouse, spec.options)
    table = catalog.get_table(spec.target)
    if not table.is_primary_key:
        return _merge_append_in_driver(spark, spec, catalog, table, started)
    # A table the library does not write (a cross-partition upsert table, ...) is refused before Spark starts.
    table.require_writable()
    user = spec.commit_user
    if is_change_feed(spec.source):
        return _merge_feed(spark, spec, catalog, table, started)
    tx, ident, done = _open_commit(spec, table)
    if done is not None:
        print(done.message, flush=True)
        return done
    in_driver = upsert_small_local_source(spec, table, tx, started)
    if in_driver is not None:
        written, described = in_driver
        return MergeResult.finished(table.identifier, user, ident, described, written, tx.base, started)
    if callable(spark):
        waited = time.monotonic()
        spark = spark()
        started += time.monotonic() - waited   # in-job time, as for a session handed in: without start-up
    source, info = load_source(spark, spec.source, spec.source_format, spec.source_options, catalog,
                               empty_schema=spark_schema(table.arrow_schema()))
    on, clauses = merge_clauses(spec, table, source.columns, info)
    if info.get("empty"):
        # A folder without data files (a day without changes): no source row can match or be inserted, so only
        # NOT MATCHED BY SOURCE clauses can apply -- and the others may name source columns an empty folder
        # does not have.
        clauses = [c for c in clauses if c.when == NOT_MATCHED_BY_SOURCE]
        if not clauses:
            nothing = Written(None, {"inserted": 0, "updated": 0, "deleted": 0}, "merge")
            return MergeResult.finished(table.identifier, user, ident, info, nothing, tx.base, started)
    planned = time.monotonic()
    if is_plain_upsert(clauses) and set(on) == set(table.primary_keys):
        written = upsert_on_spark(spark, spec, table, tx, source, info)
    else:
        written = general_merge(spark, plan_merge(spark, spec, table, tx, source, info, on, clauses))
    written.timings = dict(written.timings or {}, plan=round(planned - started, 3))
    return MergeResult.finished(table.identifier, user, ident, info, written, tx.base, started)


def _merge_append_in_driver(spark: SparkSession | Callable[[], SparkSession], spec: MergeSpec, catalog: Catalog,
                            table: Table, started: float) -> MergeResult:
    """An append table (with deletion vectors): Spark reads the source (any format it reads), and the driver
    merges it with the in-process engine (local_merge/append_target.py), which marks the changed rows in their
    vectors; the target's live rows are joined on the driver, so it must hold them."""
    require_append_vectors(table, "a MERGE into")
    if is_change_feed(spec.source):
        raise UnsupportedTableError(f"a change feed is merged by primary key; {table.identifier} is an append "
                                    "table: merge the feed's rows as a table source instead")
    tx, ident, done = _open_commit(spec, table)
    if done is not None:
        print(done.message, flush=True)
        return done
    session = spark() if callable(spark) else spark
    source, info = load_source(session, spec.source, spec.source_format, spec.source_options, catalog,
                               empty_schema=spark_schema(table.arrow_schema()))
    try:
        plan = plan_local_merge(table, source.toArrow(), spec.clauses, spec.on, tx=tx,
                                honour_sequence_field=spec.honour_sequence_field)
    except NotTranslatable as e:
        raise UnsupportedTableError(f"MERGE into the append table {table.identifier}: {e}") from None
    done_here = plan.run()
    snap = table.snapshot(done_here["snapshot_id"]) if done_here["status"] == "committed" else None
    written = Written(snap, done_here["rows"], "merge", engine="driver", timings=done_here["timings"],
                      target_splits_read=done_here["target_splits_read"],
                      target_rows_read=done_here["target_rows_read"])
    return MergeResult.finished(table.identifier, spec.commit_user, ident, info, written, tx.base, started)


def _merge_feed(spark: SparkSession | Callable[[], SparkSession], spec: MergeSpec, catalog: Catalog, table: Table,
                started: float) -> MergeResult:
    """MERGE another table's change feed exactly once, then advance its consumer (see `feed`)."""
    if spec.reapply:
        raise InvalidOptionError("reapply: a change-feed source is applied exactly once per range (the commit "
                                 "identifier is the range's); leave reapply unset")
    feed = open_feed(spec.source, catalog)
    user = spec.commit_user
    ident = feed.identifier(user) if user is not None else None
    settled = settled_feed_merge(spec, table, feed, started)
    if settled is not None:
        return settled
    on = normalize_on(spec.on, table.primary_keys, table.schema().field_names)
    rows = reduce_feed(feed, on)
    info = feed.describe()
    in_driver = mirrors(spec.clauses, spec.on, table) and rows.nbytes <= spec.driver_bytes \
        and spec.num_tasks is None
    tx = feed_transaction(table, feed, user)
    if rows.num_rows == 0:
        written = feed_written(None, {"upserted": 0, "deleted": 0})
    elif in_driver:
        snap, counts = write_feed_in_driver(table, rows, tx)
        written = feed_written(snap, counts)
    else:
        written = _merge_feed_on_spark(spark, spec, table, tx, rows, info)
    feed.advance_past(feed.end)
    return MergeResult.finished(table.identifier, user, ident, info, written, tx.base, started)


def _merge_feed_on_spark(spark: SparkSession | Callable[[], SparkSession], spec: MergeSpec, table: Table,
                         tx: Transaction, rows: pa.Table, info: dict[str, Any]) -> Written:
    """The reduced feed as a source of changes (``_change``) for the general MERGE on Spark."""
    session = spark() if callable(spark) else spark
    schema = spark_schema(rows.schema)
    source = session.createDataFrame(rows.to_pylist(), schema)
    changes = dict(info, kind="changes")
    on, clauses = merge_clauses(spec, table, source.columns, changes)
    return general_merge(session, plan_merge(session, spec, table, tx, source, changes, on, clauses))


def run_merge(spark: SparkSession | Callable[[], SparkSession], spec: MergeSpec | Mapping[str, Any]) -> dict[str, Any]:
    """`merge_into` with its result as JSON-able data (status, snapshot id, row counts, what was read)."""
    return merge_into(spark, spec).to_dict()
