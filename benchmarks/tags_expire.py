"""Benchmark: tag creation and snapshot expiry on a large table (not a test; prints figures).

    .venv/bin/python benchmarks/tags_expire.py [--snapshots 1000] [--files-per-commit 10] [--keep]

Builds, through the format library's real commit path, a primary-key table of N snapshots holding about
N * files-per-commit data files (every 25th commit is a compaction that replaces all files of one bucket, so that
expiry has data files to delete), and a small table (10 snapshots) for comparison. Data files are tiny Parquet
copies: only metadata work is measured. Then it times:

* tag creation on a cold table object (as the CLI or an Airflow task does): from the latest snapshot, from a
  snapshot id, and from a point in time -- on the large and on the small table;
* expiry of all but the newest snapshot (dry run, then for real), with the number of manifests read.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from airflow_paimon.format import Catalog  # noqa: E402
from airflow_paimon.format.commit_message import CommitMessage  # noqa: E402
from airflow_paimon.format.data_file import new_data_file_name  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
BUCKETS = 10
FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)


def build(warehouse: str, name: str, snapshots: int, files_per_commit: int) -> tuple[float, int]:
    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    table = catalog.create_table(f"db.{name}", SCHEMA, primary_keys=["id"], options={"bucket": str(BUCKETS)})
    writer = table.new_write()
    template = writer.write_bucket((), 0, pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]}), None, 0)
    meta0 = template.new_files[0]
    content = Path(table.bucket_dir((), 0), meta0.file_name).read_bytes()
    os.remove(Path(table.bucket_dir((), 0), meta0.file_name))
    live: dict[int, list] = {b: [] for b in range(BUCKETS)}
    seq = 0
    files = 0
    started = time.perf_counter()
    for i in range(1, snapshots + 1):
        messages = []
        if i % 25 == 0:
            bucket = (i // 25) % BUCKETS
            new = _fake(table, bucket, meta0, content, seq)
            seq += 1
            files += 1
            messages.append(CommitMessage(table.partition_codec.to_bytes(()), bucket, BUCKETS, [new],
                                          live[bucket]))
            live[bucket] = [new]
            kind = "COMPACT"
        else:
            kind = "APPEND"
            for k in range(files_per_commit):
                bucket = k % BUCKETS
                new = _fake(table, bucket, meta0, content, seq)
                seq += 1
                files += 1
                live[bucket].append(new)
                messages.append(CommitMessage(table.partition_codec.to_bytes(()), bucket, BUCKETS, [new], []))
        table.commit(messages, commit_kind=kind)
        if i % 100 == 0:
            print(f"  {name}: {i}/{snapshots} snapshots, {files} data files written", file=sys.stderr)
    return time.perf_counter() - started, files


def _fake(table, bucket, meta0, content: bytes, seq: int):
    name = new_data_file_name("data-")
    d = Path(table.bucket_dir((), bucket))
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content)
    return dataclasses.replace(meta0, file_name=name, min_sequence_number=seq, max_sequence_number=seq)


def time_tags(warehouse: str, name: str, repeats: int) -> dict[str, float]:
    """Median milliseconds of creating a tag on a freshly opened table (cold caches)."""
    out = {}
    probe = Catalog(warehouse).get_table(f"db.{name}")
    ids = probe.snapshot_manager.ids()
    middle = ids[len(ids) // 2]
    when = probe.snapshot(middle).time_millis
    for label, kwargs in (("latest", {}), ("snapshot id", {"snapshot_id": middle}), ("as of time", {"as_of": when})):
        samples = []
        for r in range(repeats):
            table = Catalog(warehouse).get_table(f"db.{name}")
            started = time.perf_counter()
            table.tags.create(f"bench-{label.replace(' ', '-')}-{r}", **kwargs)
            samples.append((time.perf_counter() - started) * 1000)
        out[label] = statistics.median(samples)
    table = Catalog(warehouse).get_table(f"db.{name}")
    started = time.perf_counter()
    for tag in table.tags.list():
        table.maintenance.delete_tag(tag.name)
    out["delete (each, snapshot retained)"] = (time.perf_counter() - started) * 1000 / max(3 * repeats, 1)
    return out


def time_expiry(warehouse: str, name: str) -> None:
    table = Catalog(warehouse).get_table(f"db.{name}")
    reads = []
    real = table.io.read_bytes

    def counting(path):
        if "/manifest/" in path:
            reads.append(path)
        return real(path)

    table.io.read_bytes = counting
    n = len(table.snapshot_manager.ids())
    started = time.perf_counter()
    plan = table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=n, dry_run=True)
    dry = time.perf_counter() - started
    dry_reads = len(reads)
    reads.clear()
    table = Catalog(warehouse).get_table(f"db.{name}")
    table.io.read_bytes = counting
    started = time.perf_counter()
    result = table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=n)
    real_s = time.perf_counter() - started
    print(f"  expire {len(result.snapshots)} snapshots: dry run {dry:.2f} s ({dry_reads} manifest/list reads), "
          f"real {real_s:.2f} s ({len(reads)} reads, distinct {len(set(reads))})")
    print(f"    deleted {len(result.data_files)} data files, {len(result.metadata_files)} metadata files "
          f"({len(result.snapshots)} snapshot files among them), {result.bytes_freed / 1e6:.1f} MB; "
          f"plan matched: {sorted(plan.files) == sorted(result.files)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=1000)
    ap.add_argument("--files-per-commit", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--keep", action="store_true", help="keep the warehouse directory")
    args = ap.parse_args()
    warehouse = tempfile.mkdtemp(prefix="paimon-bench-")
    try:
        print(f"warehouse: {warehouse}")
        small_s, small_files = build(warehouse, "small", 10, 10)
        big_s, big_files = build(warehouse, "big", args.snapshots, args.files_per_commit)
        print(f"built small table: 10 snapshots, {small_files} data files in {small_s:.1f} s")
        print(f"built big table: {args.snapshots} snapshots, {big_files} data files in {big_s:.1f} s")
        small = time_tags(warehouse, "small", args.repeats)
        big = time_tags(warehouse, "big", args.repeats)
        print("tag creation, median ms on a freshly opened table:")
        print(f"  {'':34s} {'10 snapshots':>14s} {str(args.snapshots) + ' snapshots':>16s}")
        for label in small:
            print(f"  {label:34s} {small[label]:14.2f} {big[label]:16.2f}")
        time_expiry(warehouse, "big")
    finally:
        if args.keep:
            print(f"kept {warehouse}")
        else:
            shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
