"""Benchmark: merging a daily increment into a historical table, ours against the alternatives.

    .venv/bin/python benchmarks/merge.py                  # N = 1M, 10M and 50M rows
    .venv/bin/python benchmarks/merge.py --sizes 1000000  # just one size
    .venv/bin/python benchmarks/merge.py --changelog --sizes 1000000,10000000   # lookup target against none
    .venv/bin/uv pip install --python .venv/bin/python deltalake   # for the delta-rs column

History: N rows (``id`` bigint key, two strings, a double, a timestamp) in a Paimon primary-key table (8 buckets),
the same rows as plain Parquet files (a Hive-style table) and as a Delta table. Increment: 1% updates spread over
all ids plus 0.5% inserts. Every Spark job runs through real spark-submit on ``local[2]``; "in-job" is the time
inside the application after the SparkSession is up, "spark-submit" the wall time of the whole command.

* ours, upsert: MergeIncrementalOperator's application with the default clauses (reads no target data); an
  increment of local Parquet files up to 64 MiB (all increments here) is written by the application's driver
  without Spark jobs;
* ours, upsert on Spark: the same with ``driver_bytes=0``, so that Spark tasks read, bucket and write the increment;
* ours, conditional: ``matched_update(set="*", condition="s.ts > t.ts") + not_matched_insert()`` (reads the key and
  ``ts`` of the touched buckets);
* Spark floor: read the increment, write it as Parquet hash-partitioned by id into 8 files sorted by id (the same
  shape of work as our upsert: one shuffle, local sorts); ``floor (global sort)`` uses ``orderBy`` instead;
* Hive-style rewrite: read the whole history, full outer join with the increment, write everything;
* delta-rs: ``deltalake`` MERGE (update all / insert all) of the same increment, in-process;
* in-process engine (``engine="local"``): the operator's in-worker MERGE (``airflow_paimon.local_merge``) of the
  upsert and of the conditional merge, each in a fresh Python process that imports first and then times only the
  MERGE (what a DAG author waits for in the worker), with that process's peak resident memory (VmHWM).

``--skip-spark`` leaves out every spark-submit variant (for the in-process engine against delta-rs alone).
``--changelog`` runs only the upsert and the conditional merge into a ``lookup`` and a ``none`` target, each size
with its own increment and the smaller sizes also with the largest one's, so that the growth with the history is
reported both with the increment growing alongside and with the same increment.

Not a test: prints one table; the targets are checked and reported at the end.
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_paimon.format import Catalog  # noqa: E402
from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV  # noqa: E402
from airflow_paimon.spark.common import application_path, parse_result  # noqa: E402

BIN = Path(sys.executable).parent
BUCKETS = 8
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("city", pa.string()), ("amount", pa.float64()),
                    ("ts", pa.timestamp("us"))])
SPARK_CONF = {"spark.sql.shuffle.partitions": str(BUCKETS), "spark.ui.enabled": "false",
              "spark.sql.session.timeZone": "UTC", "spark.sql.adaptive.enabled": "true"}

FLOOR_APP = """
import json, sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("WARN")
incr, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.monotonic()
df = spark.read.parquet(incr)
if mode == "global":
    df = df.orderBy("id")
else:
    df = df.repartition(%d, "id").sortWithinPartitions("id")
df.write.mode("overwrite").parquet(out)
print("BENCH_SECONDS", json.dumps(time.monotonic() - t0), flush=True)
""" % BUCKETS

REWRITE_APP = """
import json, sys, time
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("WARN")
hist, incr, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.monotonic()
h = spark.read.parquet(hist).alias("h")
i = spark.read.parquet(incr).alias("i")
cols = [c for c in h.columns if c != "id"]
j = h.join(i, F.col("h.id") == F.col("i.id"), "full_outer")
merged = j.select(F.coalesce(F.col("i.id"), F.col("h.id")).alias("id"),
                  *[F.when(F.col("i.id").isNotNull(), F.col("i." + c)).otherwise(F.col("h." + c)).alias(c)
                    for c in cols])
merged.write.mode("overwrite").parquet(out)
print("BENCH_SECONDS", json.dumps(time.monotonic() - t0), flush=True)
"""


def _strings(prefix: str, values: np.ndarray) -> pa.Array:
    prefixes = pa.array(np.full(len(values), prefix))
    return pc.binary_join_element_wise(prefixes, pc.cast(pa.array(values), pa.string()), "")


def rows(ids: np.ndarray, version: int, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    base = np.datetime64("2026-01-01T00:00:00", "us").astype(np.int64) + version * 86_400_000_000
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": _strings(f"customer-v{version}-", ids),
        "city": _strings("city-", ids % 997),
        "amount": pa.array(rng.random(n) * 1000 + version),
        "ts": pa.array(base + rng.integers(0, 86_400_000_000, n), pa.timestamp("us")),
    }, schema=SCHEMA)


def prepare(n: int, root: Path, increment_of: int | None = None) -> dict:
    """N rows of history and the increment of a history of `increment_of` rows (default N): 1% updates, 0.5%
    inserts."""
    m = increment_of or n
    rng = np.random.default_rng(n)
    history = rows(np.arange(n, dtype=np.int64), 0, rng)
    upd = np.sort(rng.choice(n, m // 100, replace=False))
    ins = np.arange(n, n + m // 200, dtype=np.int64)
    increment = pa.concat_tables([rows(upd, 1, rng), rows(ins, 1, rng)])
    increment = increment.take(pa.array(rng.permutation(increment.num_rows)))
    (root / "incr").mkdir(parents=True)
    pq.write_table(increment, root / "incr" / "part-0.parquet")
    (root / "hive").mkdir()
    for k, chunk in enumerate(range(0, n, 1_000_000)):
        pq.write_table(history.slice(chunk, 1_000_000), root / "hive" / f"part-{k}.parquet")
    t0 = time.monotonic()
    cat = Catalog(str(root / "wh"))
    cat.create_database("bench")
    table = cat.create_table("bench.history", SCHEMA, primary_keys=["id"], options={"bucket": str(BUCKETS)})
    for chunk in range(0, n, 2_000_000):
        table.write(history.slice(chunk, 2_000_000))
    cat.get_table("bench.history").maintenance.compact()   # a historical table: one top-level file per bucket
    paimon_s = time.monotonic() - t0
    delta = None
    try:
        from deltalake import write_deltalake
        write_deltalake(str(root / "delta"), history)
        delta = str(root / "delta")
    except ImportError:
        pass
    return {"incr": str(root / "incr"), "hive": str(root / "hive"), "wh": str(root / "wh"), "delta": delta,
            "increment_rows": increment.num_rows, "paimon_setup_s": paimon_s}


def spark_submit(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", "--driver-memory", "4g"]
    for k, v in SPARK_CONF.items():
        cmd += ["--conf", f"{k}={v}"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    t0 = time.monotonic()
    proc = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"spark-submit failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc, wall


def _seconds(proc: subprocess.CompletedProcess) -> float:
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_SECONDS "):
            return float(line.split(" ", 1)[1])
    raise RuntimeError("no BENCH_SECONDS line")


def ours(data: dict, work: Path, name: str, clauses: list | None,
         extra: dict | None = None) -> tuple[float, float, dict]:
    wh = work / f"wh-{name}"
    shutil.copytree(data["wh"], wh)
    spec = {"target": "bench.history", "warehouse": str(wh), "source": data["incr"], **(extra or {}),
            "commit_user": "bench", "commit_identifier": 1}
    if clauses is not None:
        spec["clauses"] = clauses
    proc, wall = spark_submit([application_path("merge_app"), "--spec", json.dumps(spec)])
    result = parse_result(proc.stdout.splitlines())
    assert result and result["status"] == "committed", proc.stdout[-2000:]
    table = Catalog(str(wh)).get_table("bench.history")
    result["check_rows"] = table.read(columns=["id"]).num_rows
    shutil.rmtree(wh)
    return result["seconds"], wall, result


def floor(data: dict, work: Path, mode: str) -> tuple[float, float]:
    app = work / "floor_app.py"
    app.write_text(FLOOR_APP)
    proc, wall = spark_submit([str(app), data["incr"], str(work / f"floor-{mode}"), mode])
    return _seconds(proc), wall


def rewrite(data: dict, work: Path) -> tuple[float, float]:
    app = work / "rewrite_app.py"
    app.write_text(REWRITE_APP)
    proc, wall = spark_submit([str(app), data["hive"], data["incr"], str(work / "rewrite")])
    return _seconds(proc), wall


def delta_merge(data: dict, work: Path) -> float | None:
    if data["delta"] is None:
        return None
    from deltalake import DeltaTable
    path = work / "delta-copy"
    shutil.copytree(data["delta"], path)
    source = pq.read_table(Path(data["incr"]) / "part-0.parquet")
    t0 = time.monotonic()
    (DeltaTable(str(path)).merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    seconds = time.monotonic() - t0
    shutil.rmtree(path)
    return seconds


IN_PROCESS_APP = """
import json, sys, time
from airflow_paimon.format import Catalog
from airflow_paimon.local_merge.choose import merge_here_or_refuse
wh, incr, clauses = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
table = Catalog(wh).get_table("bench.history")
t0 = time.monotonic()
d = merge_here_or_refuse(table, incr, clauses=clauses, commit_user="bench", commit_identifier=1, engine="local")
seconds = time.monotonic() - t0
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork and exec.
with open("/proc/self/status") as f:
    peak = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmHWM:"))
print("BENCH_RESULT", json.dumps({"seconds": seconds, "peak": peak, "result": d.result}), flush=True)
"""


def in_process(data: dict, work: Path, name: str, clauses: list | None) -> tuple[float, float, dict]:
    """(seconds of the MERGE alone, peak RSS in bytes, result) of the in-process engine in a fresh process."""
    wh = work / f"wh-local-{name}"
    shutil.copytree(data["wh"], wh)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS_APP, str(wh), data["incr"], json.dumps(clauses)],
                          env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"in-process merge failed:\n{proc.stderr[-5000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("BENCH_RESULT "))
    doc = json.loads(line.split(" ", 1)[1])
    assert doc["result"]["status"] == "committed" and doc["result"]["engine"] == "local", doc["result"]
    doc["result"]["check_rows"] = Catalog(str(wh)).get_table("bench.history").read(columns=["id"]).num_rows
    shutil.rmtree(wh)
    return doc["seconds"], doc["peak"], doc["result"]


def run(n: int, keep: bool, repeat: int = 1, skip_spark: bool = False) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench-merge-{n}-"))
    try:
        print(f"== N = {n:,}: preparing data in {work}", flush=True)
        data = prepare(n, work / "data")
        print(f"   increment {data['increment_rows']:,} rows; history written in {data['paimon_setup_s']:.1f} s",
              flush=True)
        out: dict = {"n": n, "increment": data["increment_rows"]}
        conditional = [{"when": "matched", "action": "update", "set": "*", "condition": "s.ts > t.ts"},
                       {"when": "not_matched", "action": "insert", "values": "*"}]
        runs: dict[str, list] = {k: [] for k in ("upsert", "upsert_spark", "conditional", "floor", "floor_global",
                                                 "rewrite")}
        local_runs: dict[str, list] = {"local_upsert": [], "local_conditional": []}
        for i in range(repeat):
            local_runs["local_upsert"].append(in_process(data, work, "upsert", None))
            local_runs["local_conditional"].append(in_process(data, work, "conditional", conditional))
            print(f"   round {i + 1}, in-process: " + ", ".join(
                f"{k} {v[-1][0]:.2f} s, peak {v[-1][1] / 2**20:.0f} MiB" for k, v in local_runs.items()), flush=True)
            if skip_spark:
                continue
            # Interleaved, so that load from elsewhere on the machine hits every variant alike.
            runs["upsert"].append(ours(data, work, "upsert", None))
            runs["upsert_spark"].append(ours(data, work, "upsert-spark", None, {"driver_bytes": 0}))
            runs["conditional"].append(ours(data, work, "conditional", conditional))
            runs["floor"].append(floor(data, work, "hash"))
            runs["floor_global"].append(floor(data, work, "global"))
            runs["rewrite"].append(rewrite(data, work))
            print(f"   round {i + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f}/{v[-1][1]:.1f}" for k, v in runs.items()),
                  flush=True)
        for k, v in list(runs.items()) + list(local_runs.items()):
            out[k] = min(v, key=lambda x: x[0]) if v else None   # the fastest, with its spark-submit time or peak
        deltas = [d for d in (delta_merge(data, work) for _ in range(repeat)) if d is not None]
        out["delta"] = min(deltas) if deltas else None
        print(f"   delta-rs: {out['delta']}", flush=True)
        expected = n + n // 200
        for k in ("upsert", "upsert_spark", "conditional", "local_upsert", "local_conditional"):
            if out[k] is not None:
                assert out[k][2]["check_rows"] == expected, (k, out[k][2]["check_rows"], expected)
        if not skip_spark:
            assert out["upsert"][2]["engine"] == "driver" and out["upsert_spark"][2]["engine"] == "spark"
        return out
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def report(results: list[dict]) -> None:
    def cell(v):
        if v is None:
            return "n/a"
        if isinstance(v, tuple):
            return f"{v[0]:7.2f} / {v[1]:6.1f}"
        return f"{v:7.2f}"

    print()
    print("seconds, fastest of the repeats: in-job / whole spark-submit (delta-rs: in-process MERGE)")
    header = f"{'':34}" + "".join(f"{'N = ' + format(r['n'], ','):>22}" for r in results)
    print(header)
    rows_ = [("ours: plain upsert", "upsert"), ("ours: plain upsert on Spark", "upsert_spark"),
             ("ours: conditional merge", "conditional"),
             ("Spark floor (hash + local sort)", "floor"), ("Spark floor (global sort)", "floor_global"),
             ("Hive-style full rewrite", "rewrite"), ("delta-rs MERGE", "delta")]
    for label, key in rows_:
        print(f"{label:34}" + "".join(f"{cell(r[key]):>22}" for r in results))
    for label, key in (("in-process: plain upsert", "local_upsert"), ("in-process: conditional", "local_conditional")):
        print(f"{label:34}" + "".join(
            f"{r[key][0]:7.2f} s, {r[key][1] / 2**20:5.0f} MiB".rjust(22) for r in results))
    print(f"{'increment rows':34}" + "".join(f"{r['increment']:>22,}" for r in results))
    print()
    by_n = {r["n"]: r for r in results}
    for r in results:
        if r["delta"] is not None:
            print(f"N={r['n']:,}: in-process upsert / delta-rs MERGE = {r['local_upsert'][0] / r['delta']:.2f}, "
                  f"in-process conditional / delta-rs MERGE = {r['local_conditional'][0] / r['delta']:.2f} "
                  "(target < 1)")
        if r["floor"] is None:
            continue
        ratio = r["upsert_spark"][0] / r["floor"][0]
        print(f"N={r['n']:,}: upsert on Spark / floor (in-job) = {ratio:.2f} (target <= 1.5); "
              f"upsert on Spark / global-sort floor = {r['upsert_spark'][0] / r['floor_global'][0]:.2f}; "
              f"conditional / full rewrite = {r['conditional'][0] / r['rewrite'][0]:.2f} (target < 1)")
    if 1_000_000 in by_n and 10_000_000 in by_n and by_n[1_000_000]["upsert"] is not None:
        for k in ("upsert", "upsert_spark"):
            growth = by_n[10_000_000][k][0] / by_n[1_000_000][k][0]
            print(f"{k} in-job growth 1M -> 10M: {growth:.2f}x (target < 1.3)")
    largest = results[-1]
    if largest["delta"] is not None and largest["upsert"] is not None:
        for k in ("upsert", "upsert_spark", "conditional"):
            print(f"N={largest['n']:,}: whole spark-submit of {k} / delta-rs MERGE = "
                  f"{largest[k][1] / largest['delta']:.2f} (target < 1 for the upsert)")


def with_lookup(wh: str, root: Path) -> str:
    """A copy of the history warehouse whose table has `changelog-producer = lookup` (same files)."""
    import dataclasses

    copy = root / "wh-lookup"
    shutil.copytree(wh, copy)
    table = Catalog(str(copy)).get_table("bench.history")
    schema = table.schema()
    assert table.schema_manager.create(dataclasses.replace(
        schema, id=schema.id + 1, options={**schema.options, "changelog-producer": "lookup"}))
    return str(copy)


def changelog_run(n: int, repeat: int, increment_of: int | None = None) -> dict:
    """The same upsert (on Spark) and conditional merge into a `none` and a `lookup` target, interleaved; the
    increment is that of a history of `increment_of` rows (default N)."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-merge-changelog-{n}-"))
    try:
        data = prepare(n, work / "data", increment_of)
        print(f"== changelog, N = {n:,}, increment {data['increment_rows']:,} rows: data in {work}", flush=True)
        targets = {"none": data["wh"], "lookup": with_lookup(data["wh"], work / "data")}
        conditional = [{"when": "matched", "action": "update", "set": "*", "condition": "s.ts > t.ts"},
                       {"when": "not_matched", "action": "insert", "values": "*"}]
        runs: dict[str, list] = {}
        for i in range(repeat):
            for producer, wh in targets.items():
                variant = dict(data, wh=wh)
                runs.setdefault(f"upsert_{producer}", []).append(
                    ours(variant, work, f"upsert-{producer}", None, {"driver_bytes": 0}))
                runs.setdefault(f"conditional_{producer}", []).append(
                    ours(variant, work, f"conditional-{producer}", conditional))
            print(f"   round {i + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f}" for k, v in runs.items()), flush=True)
        out = {"n": n, "increment": data["increment_rows"]}
        out.update({k: min(v, key=lambda x: x[0])[0] for k, v in runs.items()})
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def changelog_report(results: list[dict]) -> None:
    print(f"\nload: {os.getloadavg()} (1, 5, 15 min) on {os.cpu_count()} cores")
    for r in results:
        for kind in ("upsert", "conditional"):
            print(f"N={r['n']:,} {kind}: none {r[kind + '_none']:.2f} s, lookup {r[kind + '_lookup']:.2f} s in-job, "
                  f"lookup / none = {r[kind + '_lookup'] / r[kind + '_none']:.2f} (target <= 1.5)")
    by_n = {(r["n"], r["increment"]): r for r in results}
    largest = max(results, key=lambda r: r["n"])
    for small in (r for r in results if r["n"] < largest["n"]):
        same = "the same increment" if small["increment"] == largest["increment"] else "its own increment"
        for kind in ("upsert_lookup", "conditional_lookup"):
            growth = by_n[(largest["n"], largest["increment"])][kind] / small[kind]
            print(f"{kind} in-job growth {small['n']:,} -> {largest['n']:,} rows of history, {same} "
                  f"({small['increment']:,} -> {largest['increment']:,} rows): {growth:.2f}x (target < 1.3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000,50000000")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant; the fastest counts")
    parser.add_argument("--changelog", action="store_true",
                        help="only the merges into a lookup target against a none target")
    parser.add_argument("--skip-spark", action="store_true", help="only the in-process engine and delta-rs")
    args = parser.parse_args()
    # The lookup files that merges into a lookup target make (format/lookup_files.py), in this run's own folder,
    # inherited by the Spark processes and removed at the end: they grow with the history.
    lookup_files = tempfile.mkdtemp(prefix="bench-merge-lookup-files-")
    os.environ.setdefault(LOOKUP_DIR_ENV, lookup_files)
    try:
        if args.changelog:
            sizes = [int(s) for s in args.sizes.split(",")]
            # Each size with its own increment, and the smaller histories also with the largest's increment: the
            # growth with the history alone, as benchmarks/changes.py measures the library's.
            found = [changelog_run(n, args.repeat) for n in sizes]
            found += [changelog_run(n, args.repeat, max(sizes)) for n in sizes if n < max(sizes)]
            changelog_report(found)
            print(json.dumps(found))
            return
        results = [run(int(s), args.keep, args.repeat, args.skip_spark) for s in args.sizes.split(",")]
        report(results)
        print(json.dumps([{k: (v[:2] if isinstance(v, tuple) else v) for k, v in r.items()} for r in results]))
    finally:
        shutil.rmtree(lookup_files, ignore_errors=True)


if __name__ == "__main__":
    main()
