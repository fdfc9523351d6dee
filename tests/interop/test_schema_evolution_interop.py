"""Schema evolution with pypaimon on both sides: tables pypaimon altered (rename, drop and re-add, widening) read,
compact and expire correctly here, and tables altered here read identically in pypaimon."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.schema_change import SchemaChange

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

_COMMON = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import AtomicType
from pypaimon.schema.schema_change import SchemaChange
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})

def read(name):
    t = catalog.get_table(name)
    rb = t.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    rows = [{k: (str(v) if v is not None and not isinstance(v, (int, float, str)) else v) for k, v in r.items()}
            for r in data.to_pylist()]
    return {"columns": data.schema.names, "types": [str(f.type) for f in data.schema],
            "rows": sorted(rows, key=lambda r: str(r[data.schema.names[0]]))}

def write(name, table):
    t = catalog.get_table(name)
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(table)
    c.commit(w.prepare_commit())
    w.close(); c.close()
"""

RENAME = _COMMON + """
import json
catalog.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
catalog.create_table("db.t", Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={"bucket": "1"}), False)
write("db.t", pa.table({"id": pa.array([1], pa.int64()), "v": ["precious"]}, schema=schema))
catalog.alter_table("db.t", [SchemaChange.rename_column("v", "w")])
print(json.dumps(read("db.t")))
"""

EVOLVE = _COMMON + """
import json
catalog.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("n", pa.int32()),
                    ("f", pa.float32())])
catalog.create_table("db.t", Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={"bucket": "2"}), False)
write("db.t", pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"],
                        "n": pa.array([10, 20, 30], pa.int32()), "f": pa.array([0.5, 1.5, 2.5], pa.float32())},
                       schema=schema))
catalog.alter_table("db.t", [SchemaChange.drop_column("v")])
catalog.alter_table("db.t", [SchemaChange.add_column("v", AtomicType("STRING")),
                             SchemaChange.update_column_type("n", AtomicType("BIGINT")),
                             SchemaChange.update_column_type("f", AtomicType("DOUBLE"))])
after = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int64()), ("f", pa.float64()),
                   ("v", pa.string())])
write("db.t", pa.table({"id": pa.array([3, 4], pa.int64()), "n": pa.array([2**40, 40], pa.int64()),
                        "f": pa.array([1e300, 4.0], pa.float64()), "v": ["new3", "new4"]}, schema=after))
print(json.dumps(read("db.t")))
"""

READ = _COMMON + """
import json
print(json.dumps(read(ARGS["table"])))
"""


def _ours(table) -> dict:
    data = table.read()
    rows = [{k: (str(v) if v is not None and not isinstance(v, (int, float, str)) else v) for k, v in r.items()}
            for r in data.to_pylist()]
    return {"columns": data.schema.names, "types": [str(f.type) for f in data.schema],
            "rows": sorted(rows, key=lambda r: str(r[data.schema.names[0]]))}


def test_pypaimon_rename_then_our_compaction_and_expiry_keep_the_values(tmp_path):
    wh = str(tmp_path / "wh")
    assert run_pypaimon(RENAME, {"warehouse": wh})["rows"] == [{"id": 1, "w": "precious"}]
    t = Catalog(wh).get_table("db.t")
    assert t.read().to_pylist() == [{"id": 1, "w": "precious"}]
    old_files = {e.file.file_name for e in t.file_entries(t.latest_snapshot())}
    assert t.maintenance.compact() is not None
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1)
    live = {e.file.file_name for e in t.file_entries(t.latest_snapshot())}
    assert not live & old_files and not any((tmp_path / "wh").rglob(next(iter(old_files))))  # the only copy now
    assert run_pypaimon(READ, {"warehouse": wh, "table": "db.t"})["rows"] == [{"id": 1, "w": "precious"}]
    assert Catalog(wh).get_table("db.t").read().to_pylist() == [{"id": 1, "w": "precious"}]


def test_pypaimon_drop_readd_and_widening_read_and_compact_here(tmp_path):
    wh = str(tmp_path / "wh")
    theirs = run_pypaimon(EVOLVE, {"warehouse": wh})
    expected = [{"id": 1, "n": 10, "f": 0.5, "v": None}, {"id": 2, "n": 20, "f": 1.5, "v": None},
                {"id": 3, "n": 2**40, "f": 1e300, "v": "new3"}, {"id": 4, "n": 40, "f": 4.0, "v": "new4"}]
    assert theirs["rows"] == expected
    t = Catalog(wh).get_table("db.t")
    assert _ours(t) == theirs
    assert t.maintenance.compact() is not None
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1)
    assert _ours(Catalog(wh).get_table("db.t")) == theirs
    assert run_pypaimon(READ, {"warehouse": wh, "table": "db.t"}) == theirs


def test_tables_we_evolve_read_identically_in_pypaimon(tmp_path):
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("name", pa.string()), ("n", pa.int32()),
                        ("f", pa.float32()), ("dec", pa.decimal128(8, 2)), ("gone", pa.string())])
    t = cat.create_table("db.t", schema, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "2"})
    t.write(pa.table({"id": pa.array(range(6), pa.int64()), "dt": ["d1", "d2"] * 3,
                      "name": [f"n{i}" for i in range(6)], "n": pa.array(range(6), pa.int32()),
                      "f": pa.array([i / 2 for i in range(6)], pa.float32()),
                      "dec": [decimal.Decimal(f"{i}.25") for i in range(6)], "gone": [f"g{i}" for i in range(6)]},
                     schema=schema))
    t.alter(SchemaChange.rename_column("name", "label"), SchemaChange.rename_column("id", "key"),
            SchemaChange.update_column_type("n", "BIGINT"), SchemaChange.update_column_type("f", pa.float64()),
            SchemaChange.update_column_type("dec", "DECIMAL(12, 4)"), SchemaChange.drop_column("gone"))
    t.alter(SchemaChange.add_column("gone", "STRING"), SchemaChange.add_column("extra", pa.int32()))
    t.write(pa.table({"key": pa.array([1, 10], pa.int64()), "dt": ["d2", "d1"], "label": ["L1", "L10"],
                      "n": pa.array([2**40, 7], pa.int64()), "f": [1e300, 7.5],
                      "dec": [decimal.Decimal("12345678.1234"), decimal.Decimal("1.5")], "gone": ["G1", "G10"],
                      "extra": pa.array([1, None], pa.int32())}))
    ours = _ours(cat.get_table("db.t"))
    assert ours["columns"] == ["key", "dt", "label", "n", "f", "dec", "gone", "extra"]
    assert {r["key"]: r["gone"] for r in ours["rows"]} == {0: None, 1: "G1", 2: None, 3: None, 4: None, 5: None,
                                                          10: "G10"}
    assert run_pypaimon(READ, {"warehouse": wh, "table": "db.t"}) == ours
    assert t.maintenance.compact() is not None
    assert _ours(cat.get_table("db.t")) == ours
    assert run_pypaimon(READ, {"warehouse": wh, "table": "db.t"}) == ours
