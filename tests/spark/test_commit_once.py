"""One meaning of "already committed" for the Spark writer and the applications: a commit whose snapshot expired
is still found while a tag holds it, before any Spark job or file is written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_paimon.spark.compact_app import run_compaction
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.spark.tables import write_changes

from .test_merge import SCHEMA, make_target, row, write_source

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)


def hold_in_tag_only(cat, snapshot_id: int) -> None:
    """Tag the snapshot, commit after it and expire every snapshot but the latest: only the tag still holds it."""
    t = cat.get_table("db.t")
    t.create_tag("held", snapshot_id=snapshot_id)
    t.write(pa.Table.from_pylist([row(i, 7) for i in range(200, 203)], schema=SCHEMA))
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, older_than=FUTURE)
    assert snapshot_id not in [s.id for s in t.snapshots()]


def data_files(cat) -> set[Path]:
    return set(Path(cat.warehouse).rglob("data-*"))


class SparkWanted(Exception):
    """Raised by the session factory: the merge asked for Spark."""


def no_spark():
    raise SparkWanted()


def test_the_merge_driver_path_finds_a_tag_held_commit(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": write_source(tmp_path, [row(i, 1) for i in
                                                                                            range(30, 50)]),
            "commit_user": "merge", "commit_identifier": 11}
    first = run_merge(no_spark, spec)
    assert first["status"] == "committed" and first["engine"] == "driver"
    hold_in_tag_only(cat, first["snapshot_id"])
    latest, files = cat.get_table("db.t").latest_snapshot().id, data_files(cat)
    again = run_merge(no_spark, spec)
    assert again["status"] == "already_committed" and again["snapshot_id"] == first["snapshot_id"]
    assert cat.get_table("db.t").latest_snapshot().id == latest and data_files(cat) == files


@pytest.mark.spark
def test_the_spark_writer_and_applications_find_a_tag_held_commit(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    # The merge application's Spark path (num_tasks given: no driver upsert).
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": write_source(tmp_path, [row(i, 1) for i in
                                                                                            range(30, 50)]),
            "commit_user": "merge", "commit_identifier": 12, "num_tasks": 2}
    merged = run_merge(spark, spec)
    assert merged["status"] == "committed" and merged["engine"] == "spark"
    # The compaction application.
    compaction = {"target": "db.t", "warehouse": cat.warehouse, "commit_user": "compactor", "commit_identifier": 13}
    compacted = run_compaction(spark, compaction)
    assert compacted["status"] == "committed"
    # The Spark writer.
    df = spark.createDataFrame(pa.Table.from_pylist([dict(row(i, 2), _VALUE_KIND="+U") for i in range(5)])
                               .to_pandas())
    written = write_changes(spark, cat.get_table("db.t"), df, commit_user="writer", commit_identifier=14)
    assert written.snapshot is not None and not written.already_committed
    t = cat.get_table("db.t")
    for i, snapshot_id in enumerate((merged["snapshot_id"], compacted["snapshot_id"], written.snapshot.id)):
        t.create_tag(f"held-{i}", snapshot_id=snapshot_id)
    hold_in_tag_only(cat, written.snapshot.id)
    assert [s.id for s in t.snapshots()] == [t.latest_snapshot().id]
    t.write(pa.Table.from_pylist([row(i, 9) for i in range(40, 45)], schema=SCHEMA))   # compaction has work again
    latest, files = t.latest_snapshot().id, data_files(cat)

    again = run_merge(spark, spec)
    assert again["status"] == "already_committed" and again["snapshot_id"] == merged["snapshot_id"]
    again = run_compaction(spark, compaction)
    assert again["status"] == "already_committed" and again["snapshot_id"] == compacted["snapshot_id"]
    again = write_changes(spark, cat.get_table("db.t"), df, commit_user="writer", commit_identifier=14)
    assert again.already_committed and again.snapshot.id == written.snapshot.id
    assert cat.get_table("db.t").latest_snapshot().id == latest and data_files(cat) == files
