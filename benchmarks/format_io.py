"""Write and read speed of the format library against plain pyarrow Parquet I/O, measured in the same run.

    .venv/bin/python benchmarks/format_io.py [--rows 1000000] [--repeat 3]

Data: int64 key, two strings, two doubles; zstd. Prints seconds (best of --repeat) and ratios to the baseline.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_paimon.format import Catalog


def make_table(n: int, offset: int = 0, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(offset, offset + n, dtype=np.int64)
    rng.shuffle(ids)
    cities = np.array(["Amsterdam", "Berlin", "Copenhagen", "Dublin", "Edinburgh", "Florence", "Geneva"])
    return pa.table({
        "id": ids,
        "name": pa.array([f"customer-{i}" for i in ids]),
        "city": pa.array(cities[rng.integers(0, len(cities), n)]),
        "amount": rng.random(n) * 1000,
        "score": rng.normal(size=n),
    })


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--buckets", type=int, default=4)
    args = ap.parse_args()
    n = args.rows
    data = make_table(n)
    update = make_table(n, offset=n // 2, seed=1)   # half updates of existing keys, half new keys
    work = tempfile.mkdtemp(prefix="paimon-bench-")
    try:
        plain_path = f"{work}/plain.parquet"
        t_plain_write = best(lambda: pq.write_table(data, plain_path, compression="zstd"), args.repeat)
        t_plain_read = best(lambda: pq.read_table(plain_path), args.repeat)

        counter = iter(range(1000))

        def write_once():
            cat = Catalog(f"{work}/wh-{next(counter)}")
            cat.create_database("bench", ignore_if_exists=True)
            t = cat.create_table("bench.t", data.schema, primary_keys=["id"], options={"bucket": str(args.buckets)})
            t.write(data)

        t_write = best(write_once, args.repeat)

        cat = Catalog(f"{work}/wh-read")
        cat.create_database("bench")
        table = cat.create_table("bench.t", data.schema, primary_keys=["id"], options={"bucket": str(args.buckets)})
        table.write(data)
        t_read_one = best(lambda: table.read(), args.repeat)
        table.write(update)
        merged = table.read()
        assert merged.num_rows == n + n // 2, merged.num_rows
        t_merge_read = best(lambda: table.read(), args.repeat)
        # The same two commits into a deletion-vector table: the update marks the old rows in the vectors, so a
        # read applies them to the files above level 0 and merges nothing. Then both again keyed by a string
        # column (`name`), whose merge cannot use the integer fast path.
        dv_cat = Catalog(f"{work}/wh-dv")
        dv_cat.create_database("bench")
        t_dv_read, t_merge_string, t_dv_string = 0.0, 0.0, 0.0
        for key, dv in (("id", True), ("name", False), ("name", True)):
            options = {"bucket": str(args.buckets), "deletion-vectors.enabled": str(dv).lower()}
            t = dv_cat.create_table(f"bench.{key}_{dv}", data.schema, primary_keys=[key], options=options)
            t.write(data)
            t.write(update)
            assert t.read().num_rows == n + n // 2
            seconds = best(lambda: t.read(), args.repeat)
            if key == "id":
                t_dv_read = seconds
            elif dv:
                t_dv_string = seconds
            else:
                t_merge_string = seconds
        plain_both = f"{work}/plain-both.parquet"
        pq.write_table(pa.concat_tables([data, update]), plain_both, compression="zstd")
        t_plain_read_both = best(lambda: pq.read_table(plain_both), args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = [
        ("plain pyarrow Parquet write (baseline)", t_plain_write, 1.0, ""),
        ("primary-key write + commit", t_write, t_write / t_plain_write, "target <= 1.5x"),
        ("plain pyarrow Parquet read (baseline)", t_plain_read, 1.0, ""),
        ("primary-key read, one commit", t_read_one, t_read_one / t_plain_read, ""),
        ("merge-on-read, two overlapping commits", t_merge_read, t_merge_read / t_plain_read, "target <= 2.0x"),
        ("deletion-vector read of the same commits", t_dv_read, t_dv_read / t_plain_read,
         f"{t_dv_read / t_merge_read:.2f}x of the merge-on-read"),
        ("merge-on-read, string key", t_merge_string, t_merge_string / t_plain_read, ""),
        ("deletion-vector read, string key", t_dv_string, t_dv_string / t_plain_read,
         f"{t_dv_string / t_merge_string:.2f}x of the merge-on-read"),
        ("plain read of both commits' rows, no merge", t_plain_read_both, t_plain_read_both / t_plain_read, ""),
    ]
    print(f"rows={n:,} buckets={args.buckets} best of {args.repeat}")
    print(f"{'measurement':<45} {'seconds':>8} {'ratio':>7}  note")
    for name, secs, ratio, note in rows:
        print(f"{name:<45} {secs:8.3f} {ratio:6.2f}x  {note}")


if __name__ == "__main__":
    main()
