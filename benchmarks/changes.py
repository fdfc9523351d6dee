"""Benchmark: the change feed and the changelog producers, against plain pyarrow reads of the same files.

    .venv/bin/python benchmarks/changes.py [--rows 10000000] [--small-rows 1000000] [--buckets 8] [--repeat 11]
        [--read-rounds 20]

History: N rows (int64 ``id`` key, two strings, a double) in primary-key tables of --buckets buckets, written in
one commit. Increment: N/100 rows, half updates of ids spread over the history, half new ids. Measured, each with
its baseline in the same run, the measurements compared taking turns round by round (so that a spell of a slower
machine slows both sides of a ratio alike), the fastest run counting:

* changelog feed: ``table.changes(before, after, mode="changelog")`` of the increment's commit on a
  ``changelog-producer=input`` table, against ``pq.read_table`` of the changelog files that commit lists;
* diff: ``mode="diff"`` between two tags that share all files but the increment's, against that changelog read
  (--read-rounds rounds of the three reads);
* lookup upsert: ``table.write(increment)`` on a ``changelog-producer=lookup`` table, against the same write on a
  ``none`` table (each on a fresh copy of the table); and the lookup upsert of the same number of rows on a
  --small-rows history, for its growth with the history (--repeat rounds of the three writes). The first round
  makes the lookup files (local copies of the history files, format/lookup_files.py) the later ones find, so it
  is printed apart and the fastest of the later rounds counts; so is the first diff, which makes the shared
  files' copies before the reads are measured. Files a setup step just wrote (the table copies, those lookup
  files) are flushed to disk (os.sync) before the runs measured, which would otherwise share the processor with
  the kernel writing them back;
* diff memory: after a full compaction (tag "compacted"), the diff from "before" finds every file of every bucket
  changed and reads all of their rows: the peak growth of pyarrow's allocation (the allocator's own peak, so
  that the feed's threads count too; in a new process) with each bucket compared whole and compared in key
  slices (format/changes/slices.py);
* memory: reading all N inserts of the history's commit as a changelog range batch by batch, in a new process:
  the largest growth of pyarrow's allocated bytes and of the process's resident memory while iterating (from
  before the first batch), against the range's size in Arrow.

Not a test: prints one table of measurements and ratios, the targets beside them, then the two ratios with a
target computed round by round instead (the median of each round's ratio: see `paired`), and the processor time
of the two upserts (every thread's): the work each does, whatever the cores share of it at the same moment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_paimon.format import Catalog  # noqa: E402
from airflow_paimon.format.changes import slices  # noqa: E402
from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV  # noqa: E402
from airflow_paimon.format.table import Table  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("city", pa.string()), ("amount", pa.float64())])


def _strings(prefix: str, values: np.ndarray) -> pa.Array:
    prefixes = pa.array(np.full(len(values), prefix))
    return pc.binary_join_element_wise(prefixes, pc.cast(pa.array(values), pa.string()), "")


def rows(ids: np.ndarray, version: int, rng: np.random.Generator) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": _strings(f"customer-v{version}-", ids),
        "city": _strings("city-", ids % 997),
        "amount": pa.array(rng.random(len(ids)) * 1000 + version),
    }, schema=SCHEMA)


def history(n: int) -> pa.Table:
    rng = np.random.default_rng(n)
    return rows(rng.permutation(n).astype(np.int64), 0, rng)


def increment(n: int, size: int, seed: int = 1) -> pa.Table:
    """`size` rows: half updates of ids spread over [0, n), half new ids."""
    rng = np.random.default_rng(seed)
    upd = rng.choice(n, size // 2, replace=False).astype(np.int64)
    ins = np.arange(n, n + size - size // 2, dtype=np.int64)
    data = pa.concat_tables([rows(upd, 1, rng), rows(ins, 1, rng)])
    return data.take(pa.array(rng.permutation(data.num_rows)))


def taking_turns(fns: dict[str, Callable[[], object]], rounds: int,
                 setup: dict[str, Callable[[], object]] | None = None,
                 cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Seconds of each run of each function over `rounds` rounds, the functions taking turns within a round (each
    after its `setup`, untimed): a spell of a slower machine (other processes, the kernel writing back) then slows
    runs of every function alike, not all the runs of one, and each ratio compares runs made side by side. With
    `cpu`, the processor seconds of each run too (all the process's threads)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if setup is not None and name in setup:
                setup[name]()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
            if cpu is not None:
                cpu.setdefault(name, []).append(time.process_time() - c0)
    return times


def paired(runs: list[float], baseline: list[float]) -> float:
    """The median of the round-by-round ratios of `runs` to `baseline` (run side by side in each round).

    The fastest runs of two sides may come from different rounds, and a short baseline is likelier than a long
    run to fall into a quiet spell of a shared machine: on one whose speed comes and goes, the ratio of the two
    minima wanders (seen here: 1.9x to 2.6x over runs of the same code). Each round's own ratio compares runs
    made under the same conditions; their median ignores the rounds a spell disturbed on one side only."""
    return float(np.median([r / b for r, b in zip(runs, baseline)]))


def new_table(warehouse: str, name: str, producer: str, buckets: int) -> Table:
    cat = Catalog(warehouse)
    cat.create_database("bench", ignore_if_exists=True)
    return cat.create_table(f"bench.{name}", SCHEMA, primary_keys=["id"],
                            options={"bucket": str(buckets), "changelog-producer": producer})


def changelog_paths(table: Table, snapshot_id: int) -> list[str]:
    codec = table.partition_codec
    return [table.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file)
            for e in table.changelog_entries(table.snapshot(snapshot_id))]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def feed_memory(table: Table, start: int, end: int) -> tuple[int, int, int, int, int]:
    """(rows, range bytes, largest batch bytes, peak growth of pyarrow's allocation, peak growth of RSS)."""
    base_alloc, base_rss = pa.total_allocated_bytes(), rss_bytes()
    peak_alloc = peak_rss = 0
    n = size = largest = 0
    for batch in table.changes(start, end, mode="changelog"):
        n += batch.num_rows
        size += batch.nbytes
        largest = max(largest, batch.nbytes)
        peak_alloc = max(peak_alloc, pa.total_allocated_bytes() - base_alloc)
        peak_rss = max(peak_rss, rss_bytes() - base_rss)
        del batch
    return n, size, largest, peak_alloc, peak_rss


def diff_memory(table: Table, start: str, end: str, slice_rows: int) -> tuple[int, int]:
    """(change rows, peak growth of pyarrow's allocation) of a diff between two tags, its buckets sliced above
    `slice_rows` rows of changed files (format/changes/slices.py). The peak is the allocator's own, so that the
    feed's worker threads count too, whatever the reader saw between batches: measure in a new process."""
    slices.SLICE_ROWS = slice_rows
    base = pa.default_memory_pool().max_memory()
    rows = sum(batch.num_rows for batch in table.changes(start, end, mode="diff"))
    return rows, pa.default_memory_pool().max_memory() - base


def diff_memory_fresh(warehouse: str, slice_rows: int) -> tuple[int, int]:
    proc = subprocess.run([sys.executable, __file__, "--diff-memory", warehouse, str(slice_rows)],
                          capture_output=True, text=True, check=True)
    rows, peak = json.loads(proc.stdout.splitlines()[-1])
    return rows, peak


def feed_memory_fresh(warehouse: str, start: int, end: int) -> tuple[int, int, int, int, int]:
    """`feed_memory` in a new process, so that its resident memory holds nothing of the tables written here."""
    proc = subprocess.run([sys.executable, __file__, "--feed-memory", warehouse, str(start), str(end)],
                          capture_output=True, text=True, check=True)
    n, size, largest, alloc, rss = json.loads(proc.stdout.splitlines()[-1])
    return n, size, largest, alloc, rss


class Upsert:
    """The write of `incr` on fresh copies of a table holding `hist`, always at the same path: the first lookup
    write makes the lookup files of the history it looks into, later ones find them."""

    def __init__(self, work: Path, name: str, producer: str, hist: pa.Table, incr: pa.Table, buckets: int):
        self.name, self.incr, self.rows = name, incr, hist.num_rows + incr.num_rows - incr.num_rows // 2
        self.source = str(work / f"wh-{name}")
        new_table(self.source, name, producer, buckets).write(hist)
        self.copy = work / f"wh-{name}-copy"

    def fresh(self) -> None:
        shutil.rmtree(self.copy, ignore_errors=True)
        shutil.copytree(self.source, self.copy)
        os.sync()   # the copy's write-back is not part of the upsert measured next

    def write(self) -> None:
        Catalog(str(self.copy)).get_table(f"bench.{self.name}").write(self.incr)

    def check_and_drop(self) -> None:
        table = Catalog(str(self.copy)).get_table(f"bench.{self.name}")
        assert table.read(columns=["id"]).num_rows == self.rows
        shutil.rmtree(self.copy, ignore_errors=True)
        shutil.rmtree(self.source, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows of history (N)")
    ap.add_argument("--small-rows", type=int, default=None, help="the smaller history of the growth (default N/10)")
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=11,
                    help="rounds of the upserts (the first makes lookup files; the fastest of the others counts)")
    ap.add_argument("--read-rounds", type=int, default=20, help="rounds of the reads; the fastest counts")
    ap.add_argument("--feed-memory", nargs=3, metavar=("WAREHOUSE", "START", "END"),
                    help="only measure the memory of reading this range of bench.feed (run by the benchmark itself)")
    ap.add_argument("--diff-memory", nargs=2, metavar=("WAREHOUSE", "SLICE_ROWS"),
                    help="only measure the memory of the diff across bench.feed's compaction (run by the benchmark)")
    args = ap.parse_args()
    if args.diff_memory:
        warehouse, slice_rows = args.diff_memory
        print(json.dumps(diff_memory(Catalog(warehouse).get_table("bench.feed"), "before", "compacted",
                                     int(slice_rows))))
        return
    if args.feed_memory:
        warehouse, start, end = args.feed_memory
        table = Catalog(warehouse).get_table("bench.feed")
        print(json.dumps(feed_memory(table, int(start), int(end))))
        return
    n, buckets, repeat, read_rounds = args.rows, args.buckets, max(args.repeat, 2), args.read_rounds
    small = args.small_rows or max(n // 10, 100)
    size = max(n // 100, 2)
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-changes-"))
    os.environ.setdefault(LOOKUP_DIR_ENV, str(work / "lookup-files"))
    try:
        hist, incr = history(n), increment(n, size)
        t0 = time.perf_counter()
        table = new_table(str(work / "wh"), "feed", "input", buckets)
        first = table.write(hist)
        assert first is not None
        table.create_tag("before")
        second = table.write(incr)
        assert second is not None
        table.create_tag("after")
        print(f"N={n:,}: input table written in {time.perf_counter() - t0:.1f} s; increment {incr.num_rows:,} rows",
              flush=True)

        mem_rows, mem_size, mem_batch, mem_alloc, mem_rss = feed_memory_fresh(str(work / "wh"), 0, first.id)
        assert mem_rows == n, mem_rows

        paths = changelog_paths(table, second.id)
        assert paths, "the increment's commit lists no changelog files"
        feed = table.changes(first.id, second.id, mode="changelog").read_all()
        assert feed.num_rows == incr.num_rows, feed.num_rows
        t0 = time.perf_counter()
        diff = table.changes("before", "after", mode="diff").read_all()
        t_diff_first = time.perf_counter() - t0
        os.sync()   # the write-back of the lookup files that first diff made is not part of the reads measured next
        assert diff.num_rows == incr.num_rows + incr.num_rows // 2, diff.num_rows   # update = before + after
        del feed, diff
        reads = taking_turns({
            "plain": lambda: pa.concat_tables([pq.read_table(p) for p in paths]),
            "feed": lambda: table.changes(first.id, second.id, mode="changelog").read_all(),
            "diff": lambda: table.changes("before", "after", mode="diff").read_all(),
        }, read_rounds)
        t_plain, t_feed, t_diff = (min(reads[k]) for k in ("plain", "feed", "diff"))

        upserts = [Upsert(work, "none", "none", hist, incr, buckets),
                   Upsert(work, "lookup", "lookup", hist, incr, buckets)]
        del hist
        upserts.append(Upsert(work, "lookup-small", "lookup", history(small), increment(small, size), buckets))
        cpu: dict[str, list[float]] = {}
        writes = taking_turns({u.name: u.write for u in upserts}, repeat, {u.name: u.fresh for u in upserts}, cpu)
        for u in upserts:
            u.check_and_drop()
        t_none, t_lookup, t_lookup_small = (min(writes[k][1:]) for k in ("none", "lookup", "lookup-small"))
        paired_lookup = paired(writes["lookup"][1:], writes["none"][1:])
        cpu_none, cpu_lookup = (float(np.median(cpu[k][1:])) for k in ("none", "lookup"))
        paired_diff = paired(reads["diff"], reads["feed"])
        t_lookup_first = writes["lookup"][0]

        # every file of every bucket differs between the ends: each bucket's diff reads all of its rows
        table.maintenance.compact()
        table.create_tag("compacted")
        whole_rows, whole_peak = diff_memory_fresh(str(work / "wh"), 2**62)
        sliced_rows, sliced_peak = diff_memory_fresh(str(work / "wh"), slices.SLICE_ROWS)
        assert whole_rows == sliced_rows == incr.num_rows + incr.num_rows // 2, (whole_rows, sliced_rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    out = [
        ("pyarrow read of the commit's changelog files", t_plain, 1.0, "baseline"),
        ("changes(mode='changelog') of that commit", t_feed, t_feed / t_plain, "target <= 2.0x"),
        ("changes(mode='diff') between the two tags", t_diff, t_diff / t_feed, "target <= 3.0x of the changelog read"),
        ("the first diff: makes the shared files' lookup files", t_diff_first, t_diff_first / t_feed, "once per file"),
        ("upsert, changelog-producer=none", t_none, 1.0, "baseline"),
        ("upsert, changelog-producer=lookup", t_lookup, t_lookup / t_none, "target <= 2.0x"),
        ("the first lookup upsert: makes its lookup files", t_lookup_first, t_lookup_first / t_none, "once per file"),
        (f"lookup upsert on {small:,} rows of history", t_lookup_small, 1.0, f"baseline of the growth to {n:,}"),
        (f"lookup upsert on {n:,} rows of history", t_lookup, t_lookup / t_lookup_small, "target < 1.3x"),
    ]
    print(f"\nN={n:,} buckets={buckets} increment={size:,} rows (half updates); best of {read_rounds} rounds of the "
          f"reads and of rounds 2-{repeat} of the upserts; "
          f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"{'measurement':<50} {'seconds':>8} {'ratio':>7}  note")
    for name, secs, ratio, note in out:
        print(f"{name:<50} {secs:8.3f} {ratio:6.2f}x  {note}")
    print(f"\nround by round (the median of each round's ratio, runs side by side): lookup upsert / none upsert "
          f"{paired_lookup:.2f}x (target <= 2.0x); diff / changelog read {paired_diff:.2f}x (target <= 3.0x)")
    print(f"processor time of the upserts (all threads, median of rounds 2-{repeat}): none {cpu_none * 1000:.0f} ms, "
          f"lookup {cpu_lookup * 1000:.0f} ms, {cpu_lookup / cpu_none:.2f}x (the target is on the wall-clock time)")
    mib = 1024 * 1024
    print(f"\nfeed of {mem_rows:,} inserts batch by batch: range {mem_size / mib:,.0f} MiB in Arrow, largest batch "
          f"{mem_batch / mib:,.0f} MiB; peak growth while iterating: pyarrow allocation {mem_alloc / mib:,.0f} MiB "
          f"({mem_alloc / mem_size:.2f}x of the range), resident memory {mem_rss / mib:,.0f} MiB "
          f"({mem_rss / mem_size:.2f}x of the range)")
    print(f"diff from 'before' across a full compaction ({n + size - size // 2:,} rows in {buckets} buckets, "
          f"every file changed; {sliced_rows:,} change rows): peak growth of pyarrow allocation "
          f"{whole_peak / mib:,.0f} MiB with each bucket compared whole, {sliced_peak / mib:,.0f} MiB in slices of "
          f"{slices.SLICE_ROWS:,} rows ({sliced_peak / whole_peak:.2f}x)")


if __name__ == "__main__":
    main()
