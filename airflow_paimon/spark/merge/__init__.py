"""MERGE INTO a Paimon primary-key table on Spark, with cost that follows the increment.

Semantics are those of Paimon's Spark ``MERGE INTO`` on primary-key tables:

* the source is matched to the target on the ``on`` columns (default: the target's primary key; they must
  contain it), the target is aliased ``t`` and the source ``s``; for each row the first clause of its kind
  (matched / not matched / not matched by source) whose condition holds applies;
* several source rows for one primary key are an error (DuplicateKeyError) and nothing is committed;
* primary-key columns cannot be updated;
* a table with ``sequence.field`` keeps the newest version: merge-on-read already orders versions by it (in
  Paimon's order: a null is older than any value; ``sequence.field.sort-order``), and matched clauses skip source
  rows whose sequence fields are older than the target row's in that same order, so an older increment merged
  after a newer one changes nothing it should not;
* a plain upsert of a table with ``rowkind.field`` takes each source row's kind from that column (a '-D' row
  deletes its key); other clauses decide their rows' kinds themselves. With ``ignore-delete`` no delete is
  written (Paimon's writers drop them), so DELETE clauses change nothing.

How it runs (one module each):

* ``run``: the commit is looked for first (a retry finds it and does nothing), then one of three ways merges,
  and the driver commits once with the caller's commit user and identifier; a killed job commits nothing (its
  files are orphans for orphan cleanup). The result is a ``MergeResult`` (``result``);
* ``driver_upsert``: a plain upsert (``[matched_update('*'), not_matched_insert('*')]`` without conditions,
  ``on`` = key) of local Parquet files of up to ``driver_bytes`` (64 MiB) is written by the application itself,
  without any Spark job;
* ``upsert``: any other plain upsert reads NO target data: the source rows are written as new level-0 files with
  new sequence numbers and merge-on-read does the rest;
* ``plan`` / ``join`` / ``actions`` / ``general``: any other MERGE groups the source by (partition, bucket), and
  the one task that owns a bucket reads that bucket of the target -- only the columns the clauses need -- joins
  it with its source rows in Arrow, and hands only matched / unmatched source rows (plus, for NOT MATCHED BY
  SOURCE, the bucket's other target rows) to Spark, which evaluates the clauses' SQL; buckets the source does
  not touch are never read;
* ``feed``: another table's change feed as the source (``{"change_feed": "db.src", ...}``, by range or by
  consumer): reduced to the last change per key on the driver, written there when small, else merged on Spark;
  exactly-once by a commit identifier derived from the range, the consumer advanced only after the commit;
* ``source``: the source as a DataFrame (files, SQL, a Paimon table or what changed in it); ``spec``: the
  application's arguments.
"""

from .result import MergeResult
from .run import merge_into, run_merge
from .source import load_source
from .spec import SOURCE_FORMATS, MergeSpec

__all__ = ["MergeSpec", "MergeResult", "merge_into", "run_merge", "load_source", "SOURCE_FORMATS"]
