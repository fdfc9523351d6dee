"""sequence.field (NULLs, sort order, several fields, duplicates within one batch) and rowkind.field decide the
same versions here and in pypaimon, in both directions, and both match a plain model of Paimon's comparator."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog

from .pypaimon_env import run_pypaimon
from .test_format_interop import pypaimon_reads

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64()), ("f", pa.float64()),
                    ("op", pa.string())])

CONFIGS = {
    "db.asc": {"sequence.field": "seq"},
    "db.desc": {"sequence.field": "seq", "sequence.field.sort-order": "descending"},
    "db.multi": {"sequence.field": "seq,f"},
    "db.kinds": {"sequence.field": "seq", "rowkind.field": "op"},
    "db.ignore": {"rowkind.field": "op", "ignore-delete": "true"},
}


def batches() -> list[pa.Table]:
    """Three batches over 30 keys, each with repeated keys, NULL sequence values, ±0.0, NaN and every row kind."""
    rng = np.random.default_rng(11)
    out = []
    for b in range(3):
        n = 40
        seq = [None if x < 0 else int(x) for x in rng.integers(-1, 4, n)]
        f = [[None, -0.0, 0.0, 1.5, math.nan][x] for x in rng.integers(0, 5, n)]
        op = [["+I", "+U", "-D", "-U", "+I"][x] for x in rng.integers(0, 5, n)]
        ids = rng.integers(0, 30, n).tolist()
        out.append(pa.table({"id": ids, "v": [f"b{b}-r{i}" for i in range(n)], "seq": seq, "f": f, "op": op},
                            schema=SCHEMA))
    return out


def java_double(x: float) -> tuple:
    return (1, 0, 0) if math.isnan(x) else (0, x, math.copysign(1.0, x))


def compare(a: dict, b: dict, fields: list[str], descending: bool) -> int:
    """Paimon's UserDefinedSeqComparator over rows a and b: NULL lowest in either order."""
    for name in fields:
        x, y = a[name], b[name]
        if x is None and y is None:
            continue
        if x is None or y is None:
            return -1 if x is None else 1
        kx, ky = (java_double(x), java_double(y)) if isinstance(x, float) else (x, y)
        if kx != ky:
            c = -1 if kx < ky else 1
            return -c if descending else c
    return 0


def expected(options: dict, data: list[pa.Table]) -> dict:
    fields = options["sequence.field"].split(",") if "sequence.field" in options else []
    descending = options.get("sequence.field.sort-order") == "descending"
    kinds = "rowkind.field" in options
    winners: dict = {}
    for t in data:
        for r in t.to_pylist():
            r["op"] = r["op"] if kinds else "+I"
            if options.get("ignore-delete") == "true" and r["op"] in ("-D", "-U"):
                continue
            w = winners.get(r["id"])
            if w is None or compare(r, w, fields, descending) >= 0:
                winners[r["id"]] = r
    return {i: r["v"] for i, r in winners.items() if r["op"] in ("+I", "+U")}


def as_map(t: pa.Table) -> dict:
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist()))


def test_versions_we_write_read_the_same_in_pypaimon(tmp_path):
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    data = batches()
    for name, options in CONFIGS.items():
        t = cat.create_table(name, SCHEMA, primary_keys=["id"], options={"bucket": "2", **options})
        for b in data:
            t.write(b)
        want = expected(options, data)
        assert as_map(t.read()) == want, name
        theirs = pypaimon_reads(wh, name, [{}], tmp_path / name)[0]
        assert as_map(theirs) == want, name


WRITE = """
import pyarrow.parquet as pq
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
batches = [pq.read_table(p) for p in ARGS["batches"]]
for name, options in ARGS["configs"].items():
    schema = Schema.from_pyarrow_schema(batches[0].schema, primary_keys=["id"], options=dict(options, bucket="2"))
    cat.create_table(name, schema, False)
    t = cat.get_table(name)
    for b in batches:
        wb = t.new_batch_write_builder()
        w = wb.new_write(); w.write_arrow(b)
        c = wb.new_commit(); c.commit(w.prepare_commit()); w.close(); c.close()
print(json.dumps({"ok": True}))
"""


def test_versions_pypaimon_writes_read_the_same_here(tmp_path):
    wh = str(tmp_path / "wh")
    data = batches()
    paths = []
    for i, b in enumerate(data):
        paths.append(str(tmp_path / f"batch-{i}.parquet"))
        pq.write_table(b, paths[-1])
    run_pypaimon(WRITE, {"warehouse": wh, "batches": paths, "configs": CONFIGS})
    cat = Catalog(wh)
    for name, options in CONFIGS.items():
        assert as_map(cat.get_table(name).read()) == expected(options, data), name


def test_the_batches_tell_paimon_order_from_last_write_wins():
    """A NULL or older row written last loses for some key, so the tests above can tell the orders apart."""
    data = batches()
    last = {r["id"]: r["v"] for t in data for r in t.to_pylist()}
    for name, options in CONFIGS.items():
        if "sequence.field" in options and "rowkind.field" not in options:
            assert expected(options, data) != last, name
