"""The Spark compaction application and orphan-file cleanup on Spark (compaction in the library:
tests/format/test_compact.py)."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

from airflow_paimon.spark.compact_app import run_compaction
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.spark.orphans_app import run_remove_orphans

from .reference import canonical
from .test_merge import SCHEMA, make_target, row, write_source


def _files(table, snapshot=None):
    snap = snapshot or table.latest_snapshot()
    return table.file_entries(snap)


def _history(cat, tmp_path, spark=None, partitioned=False, options=None):
    """A table with several level-0 files per bucket, updates and deletes."""
    t = make_target(cat, partitioned=partitioned, bucket=2, options=options, rows=[row(i) for i in range(30)])
    t.write(pa.Table.from_pylist([row(i, 1) for i in range(20, 40)], schema=SCHEMA))
    keys = [{"id": i, "dt": row(i)["dt"]} for i in range(0, 30, 4)]
    t.delete(pa.Table.from_pylist(keys, schema=pa.schema([("id", pa.int64()), ("dt", pa.string())])))
    t.write(pa.Table.from_pylist([row(i, 2) for i in range(35, 45)], schema=SCHEMA))
    return cat.get_table("db.t")


@pytest.mark.spark
def test_spark_compaction_of_some_partitions(spark, warehouse, tmp_path):
    cat = warehouse
    t = _history(cat, tmp_path, partitioned=True)
    before = t.read().to_pylist()
    spec = {"target": "db.t", "warehouse": cat.warehouse, "partitions": [{"dt": "2026-11-02"}],
            "commit_user": "compactor", "commit_identifier": 1}
    r = run_compaction(spark, spec)
    assert r["status"] == "committed" and r["buckets"] >= 1
    t = cat.get_table("db.t")
    assert t.latest_snapshot().commit_kind == "COMPACT"
    for e in _files(t):
        dt_value = t.partition_codec.from_bytes(e.partition)[0]
        if dt_value == "2026-11-02":
            assert e.file.level == 5
        else:
            assert e.file.level == 0
    assert canonical(t.read().to_pylist(), ["id", "dt"]) == canonical(before, ["id", "dt"])
    again = run_compaction(spark, spec)
    assert again["status"] == "already_committed" and again["snapshot_id"] == r["snapshot_id"]
    whole = run_compaction(spark, {"target": "db.t", "warehouse": cat.warehouse})
    assert whole["status"] == "committed"
    assert {e.file.level for e in _files(cat.get_table("db.t"))} == {5}
    assert run_compaction(spark, {"target": "db.t", "warehouse": cat.warehouse})["status"] == "no_changes"
    # A merge after the compaction: new level-0 files on top of the compacted ones.
    r = run_merge(spark, {"target": "db.t", "warehouse": cat.warehouse,
                          "source": write_source(tmp_path, [row(2, 7)])})
    rows = {(x["id"], x["dt"]): x for x in cat.get_table("db.t").read().to_pylist()}
    assert rows[(2, row(2)["dt"])]["name"] == "n2-v7"


@pytest.mark.spark
def test_spark_merges_small_files_of_append_tables(spark, warehouse):
    cat = warehouse
    t = cat.create_table("db.log", SCHEMA, partition_keys=["dt"])
    for v in range(4):
        t.write(pa.Table.from_pylist([row(i, v) for i in range(v * 10, v * 10 + 10)], schema=SCHEMA))
    before = t.read().to_pylist()
    n_before = len(_files(t))
    r = run_compaction(spark, {"target": "db.log", "warehouse": cat.warehouse})
    assert r["status"] == "committed"
    t = cat.get_table("db.log")
    files = _files(t)
    assert len(files) == 3 < n_before                                   # one per partition
    assert canonical(t.read().to_pylist(), ["id", "dt"]) == canonical(before, ["id", "dt"])
    seqs = sorted((e.file.min_sequence_number, e.file.max_sequence_number) for e in files)
    assert all(lo <= hi for lo, hi in seqs)


def _age(path, seconds):
    old = time.time() - seconds
    os.utime(path, (old, old))


@pytest.mark.spark
@pytest.mark.parametrize("options", [None, {"data-file.path-directory": "data"}], ids=["table-folder", "data-folder"])
def test_spark_orphan_cleanup_matches_the_library(spark, warehouse, tmp_path, options):
    cat = warehouse
    t = _history(cat, tmp_path, partitioned=True, options=options)
    before = t.read().to_pylist()
    bucket_dir = t.bucket_dir(("2026-11-01",), 0)
    stray = [f"{bucket_dir}/data-stray-1.parquet", f"{t.path}/manifest/manifest-stray",
             f"{t.bucket_dir(('2026-11-02',), 1)}/data-stray-2.parquet"]
    for p in stray:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"x")
        _age(p, 3 * 86400)
    young = f"{bucket_dir}/data-young.parquet"
    with open(young, "wb") as f:
        f.write(b"y")
    # Every live file is old too: only references keep them.
    for root, _, names in os.walk(t.path):
        for n in names:
            if os.path.join(root, n) != young:
                _age(os.path.join(root, n), 2 * 86400)
    expected = sorted(cat.get_table("db.t").maintenance.remove_orphan_files(dry_run=True).paths)
    assert expected == sorted(stray)
    spec = {"target": "db.t", "warehouse": cat.warehouse, "num_tasks": 3}
    dry = run_remove_orphans(spark, dict(spec, dry_run=True))
    assert dry["status"] == "dry_run" and sorted(dry["files"]) == expected and dry["listing_units"] > 3
    assert all(os.path.exists(p) for p in stray)
    done = run_remove_orphans(spark, spec)
    assert done["files_deleted"] == len(stray) and not any(os.path.exists(p) for p in stray)
    assert os.path.exists(young)
    assert canonical(cat.get_table("db.t").read().to_pylist(), ["id", "dt"]) == canonical(before, ["id", "dt"])
    assert run_remove_orphans(spark, spec)["status"] == "nothing_to_delete"


@pytest.mark.spark
def test_spark_and_worker_orphan_cleanup_give_one_result(spark, warehouse, tmp_path):
    """The Spark application and the worker judge the same files and report them in the same shape; a
    partition directory that deleting orphans left empty goes on Spark as it does in the worker."""
    cat = warehouse
    t = _history(cat, tmp_path, partitioned=True)
    stray_dir = f"{t.path}/dt=2030-01-01/bucket-0"
    os.makedirs(stray_dir)
    with open(f"{stray_dir}/data-stray.parquet", "wb") as f:
        f.write(b"x")
    later = "2100-01-01"  # every unreferenced file is old enough
    worker = cat.get_table("db.t").maintenance.remove_orphan_files(older_than=later, dry_run=True).to_dict(1000)
    spec = {"target": "db.t", "warehouse": cat.warehouse, "num_tasks": 3, "older_than": later}
    on_spark = run_remove_orphans(spark, dict(spec, dry_run=True))
    assert set(on_spark) == set(worker)
    varying = ("seconds", "listing_units")
    assert {k: v for k, v in on_spark.items() if k not in varying} == \
        {k: v for k, v in worker.items() if k not in varying}
    assert worker["files"] == [f"{stray_dir}/data-stray.parquet"]
    done = run_remove_orphans(spark, spec)
    assert done["status"] == "deleted" and done["files_deleted"] == 1
    assert not os.path.exists(f"{t.path}/dt=2030-01-01")
