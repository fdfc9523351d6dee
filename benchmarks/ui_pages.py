"""Benchmark: what the tables view reads for each page of a table with many snapshots and tags (prints figures).

    .venv/bin/python benchmarks/ui_pages.py [--snapshots 10000] [--tags 100] [--repeats 3] [--warehouse DIR]

Builds, through the format library's real commit path, a primary-key table of N snapshots (upserts, every 50th
commit a compaction, so that expiry has data files to delete; every commit writes its own manifests and manifest
lists) with T tags spread over its history, or reuses the table ``db.events`` of ``--warehouse`` when it exists.
Then it times each page's data (``airflow_paimon.ui.page_data``) on a freshly opened table: the first and the last
page of the snapshot timeline, the tags, the change counts, the schema and options, and the expiry preview, and,
for comparison, the full dry runs of snapshot and tag expiry that the preview replaced (they read every retained
snapshot), checking that both list the same files.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from airflow_paimon.format import Catalog, Table  # noqa: E402
from airflow_paimon.ui import page_data  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])
IDENTIFIER = "db.events"


def build(warehouse: str, snapshots: int, tags: int) -> float:
    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    table = catalog.create_table(IDENTIFIER, SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    started = time.perf_counter()
    for i in range(1, snapshots + 1):
        if i % 50 == 0:
            table.maintenance.compact()
        else:
            ids = [i % 500, i % 500 + 1000]
            table.write(pa.table({"id": pa.array(ids, pa.int64()), "value": [f"v{i}"] * 2}, schema=SCHEMA))
        if i % 1000 == 0:
            print(f"  {i}/{snapshots} snapshots", file=sys.stderr)
    step = max(1, snapshots // tags)
    for n in range(tags):
        table.create_tag(f"t{n:03d}", snapshot_id=snapshots - n * step)
    return time.perf_counter() - started


def timed(warehouse: str, repeats: int, read: Callable[[Table], Any]) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(repeats):
        table = Catalog(warehouse).get_table(IDENTIFIER)  # a fresh table object: nothing cached between runs
        started = time.perf_counter()
        result = read(table)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=10_000)
    ap.add_argument("--tags", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warehouse", help="reuse (or build and keep) the table of this warehouse")
    args = ap.parse_args()
    warehouse = args.warehouse or tempfile.mkdtemp(prefix="paimon-bench-")
    try:
        if not Path(warehouse, "db.db", "events", "snapshot").exists():
            print(f"built {args.snapshots} snapshots and {args.tags} tags in "
                  f"{build(warehouse, args.snapshots, args.tags):.1f} s")
        probe = Catalog(warehouse).get_table(IDENTIFIER)
        ids = probe.snapshot_manager.ids()
        latest = probe.snapshot(ids[-1])
        now = dt.datetime.fromtimestamp(latest.time_millis / 1000, dt.timezone.utc) + dt.timedelta(days=1)
        pages = -(-len(ids) // page_data.DEFAULT_PAGE_SIZE)
        print(f"table: {len(ids)} snapshots, {len(probe.tags.list())} tags; median of {args.repeats} on a fresh "
              "table object:")
        rows: list[tuple[str, Callable[[Table], Any]]] = [
            ("timeline, first page", lambda t: page_data.timeline(t, t.tags.list(), 1)),
            ("timeline, last page", lambda t: page_data.timeline(t, t.tags.list(), pages)),
            ("tags", lambda t: page_data.tag_rows(t.tags.list())),
            ("changes over 20 snapshots", lambda t: page_data.changes_per_day(t, ids[-1] - 20, ids[-1])),
            ("schema and options", lambda t: (page_data.schema_fields(t), page_data.driving_options(t.options()))),
        ]
        for label, read in rows:
            print(f"  {label:40s} {timed(warehouse, args.repeats, read)[0]:8.3f} s")
        preview_s, preview = timed(warehouse, args.repeats, lambda t: page_data.expiry_preview(t, now=now))
        full_s, (snapshots, tags) = timed(warehouse, 1, lambda t: (
            t.maintenance.expire_snapshots(dry_run=True, now=now), t.maintenance.expire_tags(now=now, dry_run=True)))
        print(f"  {'expiry preview':40s} {preview_s:8.3f} s  ({len(preview.snapshots.snapshots)} of "
              f"{preview.expirable} expirable snapshots shown, {len(preview.snapshots.files)} files, "
              f"{preview.snapshots.bytes_freed} bytes)")
        print(f"  {'full dry runs (every retained snapshot)':40s} {full_s:8.3f} s  (once)")
        same = sorted(snapshots.files) == sorted(preview.snapshots.files) and \
            sorted(tags.files) == sorted(preview.tags.files)
        print(f"same files: {same}")
    finally:
        if args.warehouse:
            print(f"kept {warehouse}")
        else:
            shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
