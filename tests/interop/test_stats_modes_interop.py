"""pypaimon prunes files by the statistics of tables we write under each statistics mode (dense or not), and
keeps exactly the rows a filter asks for: the entries name and lay out their statistics as Paimon's do. So does
pypaimon-rust's SQL on the same tables."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_paimon.format import Catalog

from .pypaimon_env import run_paimon_rust, run_pypaimon

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.int32()))])

# Per read: (table, column, predicate, value) -> the rows' keys and the number of files pypaimon planned.
READ_FILTERED = """
from pypaimon import CatalogFactory
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = []
for name, column, op, value in ARGS["reads"]:
    rb = cat.get_table(name).new_read_builder()
    rb = rb.with_filter(getattr(rb.new_predicate_builder(), op)(column, value))
    splits = rb.new_scan().plan().splits()
    data = rb.new_read().to_arrow(splits)
    out.append([sorted(data.column("k").to_pylist()), sum(len(s.files) for s in splits)])
print(json.dumps(out))
"""

SQL_KEYS = """
from pypaimon_rust.datafusion import SQLContext
ctx = SQLContext()
ctx.register_catalog("paimon", {"warehouse": ARGS["warehouse"]})
ctx.set_current_catalog("paimon")
print(json.dumps([sorted(k for b in ctx.sql(q) for k in b.column(0).to_pylist()) for q in ARGS["queries"]]))
"""

MODES = {
    "default": {},
    "none": {"metadata.stats-mode": "none"},
    "none-sparse": {"metadata.stats-mode": "none", "metadata.stats-dense-store": "false"},
    "counts": {"metadata.stats-mode": "counts"},
    "full-b-first-1": {"metadata.stats-keep-first-n-columns": "1", "fields.b.stats-mode": "full"},
    "truncate-2": {"metadata.stats-mode": "truncate(2)"},
}


def batch(first: int, n: int) -> pa.Table:
    ks = list(range(first, first + n))
    return pa.table({"k": ks, "a": [k * 10 for k in ks], "b": [f"value-{k:06d}-of-a-long-text" for k in ks],
                     "c": [[k] for k in ks]}, schema=SCHEMA)


FILTERS = [("a", "greater_or_equal", 3000, pc.field("a") >= 3000, "a >= 3000"),
           ("b", "equal", "value-000105-of-a-long-text", pc.field("b") == "value-000105-of-a-long-text",
            "b = 'value-000105-of-a-long-text'"),
           ("k", "less_than", 50, pc.field("k") < 50, "k < 50")]


def write_tables(warehouse: str) -> dict[tuple[str, str], list[int]]:
    """A table per mode, of four files with distinct values; (mode, column filtered) -> the keys read here."""
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    expected = {}
    for name, options in MODES.items():
        t = catalog.create_table(f"db.{name}", SCHEMA, options=options)
        for first in (0, 100, 200, 300):
            t.write(batch(first, 50))
        every = t.read()
        for column, _, _, expr, _ in FILTERS:
            expected[name, column] = sorted(every.filter(expr).column("k").to_pylist())
    return expected


def test_pypaimon_prunes_and_filters_by_our_statistics(tmp_path):
    wh = str(tmp_path / "wh")
    expected = write_tables(wh)
    reads = [[f"db.{name}", column, op, value] for name in MODES for column, op, value, _, _ in FILTERS]
    got = run_pypaimon(READ_FILTERED, {"warehouse": wh, "reads": reads})
    planned = {}
    for (name, column, _, _), (keys, files) in zip(reads, got):
        assert keys == expected[name[3:], column], (name, column)
        planned[name[3:], column] = files
    # The files whose statistics exclude the value are skipped, and only those: where the column keeps bounds
    # that tell the files apart. Of the four files, one holds the rows asked for.
    bounded = {("default", "a"), ("default", "b"), ("default", "k"), ("truncate-2", "a"), ("truncate-2", "k"),
               ("full-b-first-1", "k"), ("full-b-first-1", "b")}
    assert planned == {key: 1 if key in bounded else 4 for key in planned}


def test_paimon_rust_filters_our_tables_exactly(tmp_path):
    wh = str(tmp_path / "wh")
    expected = write_tables(wh)
    queries = [(name, column, f'SELECT k FROM db."{name}" WHERE {where}')
               for name in MODES for column, _, _, _, where in FILTERS]
    got = run_paimon_rust(SQL_KEYS, {"warehouse": wh, "queries": [q for _, _, q in queries]})
    assert {(name, column): keys for (name, column, _), keys in zip(queries, got)} == expected
