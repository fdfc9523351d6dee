"""Benchmark: commits and expiry on an S3 store (moto's server on 127.0.0.1) against a local disk (not a test).

    .venv/bin/python benchmarks/object_store.py [--snapshots 1000] [--commits 20]

Two primary-key tables are built on a local disk through the format library's real commit path (tags_expire.py's
builder: tiny data files, one per commit, every 25th commit a compaction): one of 10 snapshots and one of
``--snapshots``. Each is copied whole into a bucket of a local S3 server (a Paimon table names its files
relative to its own folder, so the copy is the same table), then, on the disk and on the store:

* commit latency: ``--commits`` one-row writes into each table (data file, manifests, snapshot), median and
  worst, with the HTTP requests each commit sent to the store (from the server's request log). That count is
  the point: it must not grow with the table's history, or commits would slow down as tables age;
* expiry of all but the newest snapshot of the large table, with its requests.

The store is a server process on this machine: its latency is a fraction of a millisecond, where a real
S3 region answers in 10-30 ms. Multiply the request counts by that to estimate a real store's latency.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
from tags_expire import build  # noqa: E402

from airflow_paimon.format import Catalog  # noqa: E402
from airflow_paimon.format.fileio import FileIO  # noqa: E402

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
CREDENTIALS = {"s3.access-key": "bench", "s3.secret-key": "bench-secret", "s3.region": "us-east-1",
               "s3.path.style.access": "true"}


class RequestLog:
    """Counts the requests the S3 server answered, by method, from its request log (one line per request,
    written before the response is sent)."""

    def __init__(self, path: Path) -> None:
        self.file = path.open()

    def take(self) -> collections.Counter[str]:
        """The counts since the last call."""
        counts: collections.Counter[str] = collections.Counter()
        for line in self.file.readlines():
            for method in ("GET", "PUT", "HEAD", "DELETE", "POST"):
                if f'"{method} ' in line:
                    counts[method] += 1
                    break
        return counts


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], str, RequestLog]:
    """moto's S3 server in a process of its own (in this one, it would compete with the client for the GIL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = folder / "requests.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return server, endpoint, RequestLog(log_path)


def upload(local_root: str, warehouse: str, options: dict[str, str]) -> int:
    """Copy every file under `local_root` to the same relative key under `warehouse`."""
    io = FileIO(warehouse, options)
    files = [p for p in Path(local_root).rglob("*") if p.is_file()]

    def put(p: Path) -> None:
        io.write_bytes(f"{warehouse}/{p.relative_to(local_root).as_posix()}", p.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))
    return len(files)


def time_commits(warehouse: str, options: dict[str, str], name: str, commits: int,
                 log: RequestLog | None) -> tuple[list[float], list[int]]:
    """Seconds and store requests of each one-row write into the table (opened once, as a task does)."""
    table = Catalog(warehouse, options).get_table(f"db.{name}")
    seconds, requests = [], []
    for i in range(commits):
        row = pa.table({"id": pa.array([10_000_000 + i], pa.int64()), "v": [f"bench-{i}"]})
        if log is not None:
            log.take()
        started = time.perf_counter()
        table.write(row)
        seconds.append(time.perf_counter() - started)
        if log is not None:
            requests.append(sum(log.take().values()))
    return seconds, requests


def time_expiry(warehouse: str, options: dict[str, str], name: str,
                log: RequestLog | None) -> tuple[float, int, collections.Counter[str]]:
    table = Catalog(warehouse, options).get_table(f"db.{name}")
    n = len(table.snapshot_manager.ids())
    if log is not None:
        log.take()
    started = time.perf_counter()
    result = table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=n)
    seconds = time.perf_counter() - started
    counts = log.take() if log is not None else collections.Counter()
    return seconds, len(result.snapshots), counts


def p50(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=1000, help="snapshots of the large table")
    ap.add_argument("--commits", type=int, default=20, help="commits timed per table and store")
    args = ap.parse_args()
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[key]      # the options below say everything; no profile or endpoint from outside
    root = tempfile.mkdtemp(prefix="paimon-bench-store-")
    server, endpoint, log = start_server(Path(root))
    try:
        local = f"{root}/wh"
        small_s, _ = build(local, "small", 10, 1)
        big_s, _ = build(local, "big", args.snapshots, 1)
        print(f"built on disk: 10 snapshots in {small_s:.1f} s, {args.snapshots} snapshots in {big_s:.1f} s")
        import boto3

        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench-secret",
                     region_name="us-east-1").create_bucket(Bucket="bench")
        options = dict(CREDENTIALS, **{"s3.endpoint": endpoint})
        remote = "s3://bench/wh"
        started = time.perf_counter()
        copied = upload(local, remote, options)
        print(f"copied {copied} files to {endpoint} in {time.perf_counter() - started:.1f} s")
        log.take()

        print(f"\ncommit of one row (write + commit), {args.commits} commits per table, seconds:")
        print(f"  {'table':24s} {'disk p50':>9s} {'S3 p50':>9s} {'ratio':>8s} {'S3 max':>8s} "
              f"{'requests/commit (min-max)':>26s}")
        per_commit = {}
        for name, snapshots in (("small", 10), ("big", args.snapshots)):
            disk, _ = time_commits(local, {}, name, args.commits, None)
            store, requests = time_commits(remote, options, name, args.commits, log)
            per_commit[name] = requests
            ratio = p50(store) / p50(disk)
            spread = f"{statistics.median(requests):.0f} ({min(requests)}-{max(requests)})"
            print(f"  {f'{snapshots:,} snapshots':24s} {p50(disk):9.3f} {p50(store):9.3f} {ratio:7.2f}x "
                  f"{max(store):8.3f} {spread:>26s}")
        small, big = statistics.median(per_commit["small"]), statistics.median(per_commit["big"])
        print(f"  median requests per commit: {big:.0f} with {args.snapshots:,} snapshots, {small:.0f} with 10 "
              f"(they follow the number of manifests, which manifest merging keeps small, not the history)")

        disk_s, disk_n, _ = time_expiry(local, {}, "big", None)
        store_s, store_n, counts = time_expiry(remote, options, "big", log)
        print(f"\nexpiry of {store_n:,} snapshots (all but the newest), seconds:")
        print(f"  {'disk':>9s} {'S3':>9s} {'ratio':>8s}  requests")
        by_method = ", ".join(f"{m} {c:,}" for m, c in sorted(counts.items()))
        print(f"  {disk_s:9.3f} {store_s:9.3f} {store_s / disk_s:7.2f}x  {sum(counts.values()):,} ({by_method}), "
              f"{sum(counts.values()) / max(store_n, 1):.1f} per expired snapshot")
        assert disk_n == store_n, (disk_n, store_n)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
