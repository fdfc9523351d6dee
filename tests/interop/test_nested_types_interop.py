"""ARRAY, MAP and ROW columns (nested nulls included) read the same in pypaimon and here, both ways: tables we
write and update read in pypaimon as we read them, and pypaimon's tables read here as pypaimon reads them and
take our upserts."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog

from .pypaimon_env import run_pypaimon
from .test_format_interop import pypaimon_reads

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    pa.field("point", pa.struct([pa.field("x", pa.int32()), pa.field("ys", pa.list_(pa.float64()))])),
    pa.field("matrix", pa.list_(pa.list_(pa.int32()))),
])


def batch(ids: range, v: int) -> pa.Table:
    """Values with nulls at every level: null columns, null elements, null map values, null struct fields."""
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "tags": [None if i % 5 == 0 else [f"t{i}", None, f"v{v}"][: 1 + i % 3] for i in ids],
        "attrs": [None if i % 7 == 0 else [("k", i), ("n", None)] if i % 2 else [] for i in ids],
        "point": [None if i % 4 == 0 else {"x": None if i % 3 == 0 else i + v, "ys": [float(v), None]} for i in ids],
        "matrix": [[[i, v], None, []] if i % 2 else None for i in ids],
    }, schema=SCHEMA)


def rows(t: pa.Table) -> list:
    """Rows as JSON values (map entries as pairs), sorted by id."""
    return sorted(json.loads(json.dumps(t.select(SCHEMA.names).to_pylist())), key=lambda r: r["id"])


WRITE = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    pa.field("point", pa.struct([pa.field("x", pa.int32()), pa.field("ys", pa.list_(pa.float64()))])),
    pa.field("matrix", pa.list_(pa.list_(pa.int32()))),
])
for name, pks, options in ARGS["tables"]:
    cat.create_table(name, Schema.from_pyarrow_schema(schema, primary_keys=pks or None, options=options), False)
    t = cat.get_table(name)
    for data in ARGS["batches"]:
        for r in data:  # JSON brought map entries as lists; Arrow takes them as pairs
            r["attrs"] = None if r["attrs"] is None else [tuple(e) for e in r["attrs"]]
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.Table.from_pylist(data, schema=schema))
        c.commit(w.prepare_commit())
        w.close(); c.close()
print(json.dumps("ok"))
"""


@pytest.mark.parametrize("pk", [True, False], ids=["primary-key", "append"])
def test_pypaimon_reads_our_nested_columns(tmp_path, pk):
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"] if pk else (),
                             options={"bucket": "2"} if pk else {})
    t.write(batch(range(0, 30), 1))
    t.write(batch(range(20, 40), 2))
    ours = t.read()
    expected = {r["id"]: r for r in rows(batch(range(0, 30), 1))}
    expected.update({r["id"]: r for r in rows(batch(range(20, 40), 2))})
    if pk:
        assert rows(ours) == sorted(expected.values(), key=lambda r: r["id"])
    [theirs] = pypaimon_reads(wh, "db.t", [{}], tmp_path / "out")
    assert rows(theirs) == rows(ours)
    assert len(rows(theirs)) == (40 if pk else 50)


def test_we_read_and_update_pypaimon_nested_tables(tmp_path):
    wh = str(tmp_path / "wh")
    batches = [batch(range(0, 30), 1).to_pylist(), batch(range(20, 40), 2).to_pylist()]
    run_pypaimon(WRITE, {"warehouse": wh, "batches": batches,
                         "tables": [["db.pk", ["id"], {"bucket": "2"}], ["db.append", [], {}]]})
    catalog = Catalog(wh)
    for name in ("db.pk", "db.append"):
        [theirs] = pypaimon_reads(wh, name, [{}], tmp_path / name)
        assert rows(catalog.get_table(name).read()) == rows(theirs)
        assert len(rows(theirs)) == (40 if name == "db.pk" else 50)

    pk = catalog.get_table("db.pk")
    pk.write(batch(range(35, 45), 3))
    [theirs] = pypaimon_reads(wh, "db.pk", [{}], tmp_path / "after")
    assert rows(theirs) == rows(pk.read())
    assert [r["id"] for r in rows(theirs)] == list(range(45))
    assert {r["id"]: r for r in rows(theirs)}[36] == rows(batch(range(36, 37), 3))[0]
