"""Schema evolution: columns of data files written under older schemas are found by field id, in every read
(merge-on-read, append reads, compaction, filtered and pruned reads), and `Table.alter` changes a schema as
Paimon's ALTER TABLE does."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from airflow_paimon.format import Catalog, PaimonError
from airflow_paimon.format.schema_change import SchemaChange, SchemaChangeError, widens

from .upkeep_helpers import tree_digest

KV = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int32()), ("f", pa.float32())])


def kv_rows(ids, v="x", n=None, f=None, schema=KV) -> pa.Table:
    ids = list(ids)
    cols = {"id": pa.array(ids, pa.int64())}
    names = schema.names
    if "v" in names:
        cols["v"] = [f"{v}{i}" for i in ids]
    if "n" in names:
        cols["n"] = pa.array([n if n is not None else i for i in ids], schema.field("n").type)
    if "f" in names:
        cols["f"] = pa.array([f if f is not None else i + 0.5 for i in ids], schema.field("f").type)
    return pa.table(cols)


def rows(table, **kw) -> list[dict]:
    return sorted(table.read(**kw).to_pylist(), key=lambda r: r["id"])


@pytest.fixture(params=["primary-key", "append"])
def table(request, catalog):
    if request.param == "primary-key":
        return catalog.create_table("db.t", KV, primary_keys=["id"], options={"bucket": "2"})
    return catalog.create_table("db.t", KV)


def _schema_file(t, schema_id: int) -> dict:
    return json.loads((Path(t.path) / "schema" / f"schema-{schema_id}").read_text())


def _retype_by_another_engine(t, field: int, new_type: str) -> None:
    """Schema 1 = schema 0 with one field's type changed, as an engine allowing explicit casts writes it."""
    doc = _schema_file(t, 0)
    doc["id"] = 1
    doc["fields"][field]["type"] = new_type
    (Path(t.path) / "schema" / "schema-1").write_text(json.dumps(doc))


def _data_files(t) -> list:
    return [e.file for e in t.file_entries(t.latest_snapshot())]


def test_rename_then_compact_then_expire_keeps_the_values(catalog):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_keys=["id"])
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["precious"]}))
    t.alter(SchemaChange.rename_column("v", "w"))
    assert rows(t) == [{"id": 1, "w": "precious"}]
    assert t.maintenance.compact() is not None
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1)
    assert [s.id for s in t.snapshots()] == [2]
    assert [f.schema_id for f in _data_files(t)] == [1]
    fresh = catalog.get_table("db.t")
    assert rows(fresh) == [{"id": 1, "w": "precious"}]


def test_rename_reads_old_files_in_every_read(table):
    t = table
    t.write(kv_rows(range(4)))
    t.alter(SchemaChange.rename_column("v", "w"))
    t.write(kv_rows([2, 9], v="y").rename_columns(["id", "w", "n", "f"]))
    got = {r["id"]: r["w"] for r in rows(t)}
    if t.is_primary_key:
        assert got == {0: "x0", 1: "x1", 2: "y2", 3: "x3", 9: "y9"}
    else:
        assert sorted(r["w"] for r in t.read().to_pylist()) == sorted(["x0", "x1", "x2", "x3", "y2", "y9"])
    # Filtered and projected reads find the old values too (old files' statistics are under the old name).
    assert sorted(t.read(columns=["w"], filter=ds.field("w") == "x1").column("w").to_pylist()) == ["x1"]
    before = t.read().sort_by([("id", "ascending"), ("w", "ascending")])
    assert t.maintenance.compact() is not None
    assert t.read().sort_by([("id", "ascending"), ("w", "ascending")]) == before


def test_drop_then_add_the_same_name_reads_null_for_old_files(table):
    t = table
    t.write(kv_rows(range(3)))
    t.alter(SchemaChange.drop_column("v"))
    assert "v" not in t.arrow_schema().names
    t.alter(SchemaChange.add_column("v", pa.string()))
    assert [f.id for f in t.schema().fields] == [0, 2, 3, 4]
    assert [r["v"] for r in rows(t)] == [None, None, None]
    # Old values never come back: not through a filter (stats of old files describe the dropped column) ...
    assert t.read(filter=ds.field("v") == "x1").num_rows == 0
    assert t.read(filter=ds.field("v").is_null()).num_rows == 3
    # ... nor through compaction.
    t.maintenance.compact()
    t.write(kv_rows([1, 7]).set_column(1, "v", pa.array(["new1", "new7"])).select(["id", "n", "f", "v"]))
    got = {r["id"]: r["v"] for r in rows(t)}
    if t.is_primary_key:
        assert got == {0: None, 1: "new1", 2: None, 7: "new7"}
    else:
        assert sorted(r["v"] or "" for r in t.read().to_pylist()) == ["", "", "", "new1", "new7"]
    assert t.read(filter=ds.field("v") == "x1").num_rows == 0


def test_widening_int_to_bigint_and_float_to_double(table):
    t = table
    t.write(kv_rows(range(3), n=7, f=0.25))
    t.alter(SchemaChange.update_column_type("n", pa.int64()), SchemaChange.update_column_type("f", "DOUBLE"))
    assert t.arrow_schema().field("n").type == pa.int64() and t.arrow_schema().field("f").type == pa.float64()
    big = 2**40
    t.write(pa.table({"id": pa.array([5], pa.int64()), "v": ["b"], "n": pa.array([big], pa.int64()),
                      "f": pa.array([1e300], pa.float64())}))
    expected = [(0, 7, 0.25), (1, 7, 0.25), (2, 7, 0.25), (5, big, 1e300)]
    assert [(r["id"], r["n"], r["f"]) for r in rows(t)] == expected
    data = t.read()
    assert data.schema.field("n").type == pa.int64() and data.schema.field("f").type == pa.float64()
    # Statistics of the INT file still prune (and keep) correctly under the BIGINT type.
    assert sorted(t.read(filter=ds.field("n") == 7).column("id").to_pylist()) == [0, 1, 2]
    assert t.read(filter=ds.field("n") > 2**31).column("id").to_pylist() == [5]
    t.maintenance.compact()
    assert [(r["id"], r["n"], r["f"]) for r in rows(t)] == expected


def test_new_column_reads_null_and_prunes_old_append_files(catalog):
    t = catalog.create_table("db.t", KV)
    t.write(kv_rows(range(3)))
    t.alter(SchemaChange.add_column("z", pa.int64(), comment="added later"))
    t.write(kv_rows([8]).append_column("z", pa.array([5], pa.int64())))
    assert [r["z"] for r in rows(t)] == [None, None, None, 5]
    assert t.read(columns=["z"]).column("z").to_pylist().count(None) == 3
    splits = t.plan(filter=ds.field("z") == 5)
    assert sum(len(s.files) for s in splits) == 1      # the old file's z is NULL in every row
    assert t.read(filter=ds.field("z") == 5).column("id").to_pylist() == [8]
    assert _schema_file(t, 1)["fields"][-1] == {"id": 4, "name": "z", "type": "BIGINT", "description": "added later"}


def test_a_writer_that_opened_the_table_before_a_change_stays_correct(catalog):
    stale = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_keys=["id"])
    catalog.get_table("db.t").alter(SchemaChange.rename_column("v", "w"))
    stale.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["old-name"]}))
    assert stale.latest_snapshot().schema_id == 1              # snapshots carry the latest schema
    assert rows(catalog.get_table("db.t")) == [{"id": 1, "w": "old-name"}]


def test_compaction_by_a_table_opened_before_a_change_keeps_the_new_columns(table, catalog):
    stale = catalog.get_table("db.t")
    table.write(kv_rows([1, 2]))
    table.alter(SchemaChange.add_column("z", pa.int64()), SchemaChange.rename_column("v", "w"))
    table.write(kv_rows([3]).rename_columns(["id", "w", "n", "f"]).append_column("z", pa.array([33], pa.int64())))
    expected = rows(table)
    assert stale.maintenance.compact() is not None
    assert rows(catalog.get_table("db.t")) == expected
    assert [r["z"] for r in expected] == [None, None, 33]


def test_concurrent_changes_apply_on_top_of_each_other(catalog):
    a = catalog.create_table("db.t", KV, primary_keys=["id"])
    b = catalog.get_table("db.t")
    a.alter(SchemaChange.add_column("x", pa.int64()))
    b.alter(SchemaChange.add_column("y", pa.string()))
    s = catalog.get_table("db.t").schema()
    assert s.id == 2 and [(f.id, f.name) for f in s.fields][-2:] == [(4, "x"), (5, "y")]
    assert s.highest_field_id == 5


def test_rename_carries_options_that_name_the_column(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["id"],
                             options={"sequence.field": "n", "fields.f.aggregate-function": "sum",
                                      "bucket-key": "id"})
    t.alter(SchemaChange.rename_column("n", "m"), SchemaChange.rename_column("f", "g"))
    assert t.options()["sequence.field"] == "m"
    assert t.options()["fields.g.aggregate-function"] == "sum" and "fields.f.aggregate-function" not in t.options()
    t.write(kv_rows([1]).rename_columns(["id", "v", "m", "g"]))
    assert rows(t)[0]["m"] == 1


def test_renamed_primary_key_keeps_matching_keys_and_buckets(catalog):
    t = catalog.create_table("db.t", KV, primary_keys=["id"], options={"bucket": "3"})
    t.write(kv_rows(range(10)))
    t.alter(SchemaChange.rename_column("id", "key"))
    assert t.primary_keys == ["key"] and t.bucket_keys == ["key"]
    t.write(kv_rows([3, 12], v="y").rename_columns(["key", "v", "n", "f"]))
    got = {r["key"]: r["v"] for r in t.read().to_pylist()}
    assert got == {**{i: f"x{i}" for i in range(10)}, 3: "y3", 12: "y12"}
    assert t.read(filter=ds.field("key") == 4).column("v").to_pylist() == ["x4"]
    t.maintenance.compact()
    assert {r["key"]: r["v"] for r in t.read().to_pylist()} == got
    assert sum(len(s.files) for s in t.plan()) == 3       # one file per bucket: the new keys met the old ones


def test_add_column_before_partition(catalog):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())]),
                             partition_keys=["dt"], options={"add-column-before-partition": "true"})
    t.alter(SchemaChange.add_column("z", "INT"))
    assert t.arrow_schema().names == ["id", "v", "z", "dt"]


@pytest.mark.parametrize("change, message", [
    (SchemaChange.rename_column("dt", "day"), "Cannot rename partition column: [dt]"),
    (SchemaChange.drop_column("dt"), "Cannot drop partition key or primary key: [dt]"),
    (SchemaChange.update_column_type("dt", "VARCHAR(20)"), "Cannot update partition column: [dt]"),
    (SchemaChange.drop_column("id"), "Cannot drop partition key or primary key: [id]"),
    (SchemaChange.update_column_type("id", "DECIMAL(30, 0)"), "Cannot update primary key"),
    (SchemaChange.update_column_type("n", "SMALLINT"), "Column type n[INT] cannot be converted to SMALLINT"),
    (SchemaChange.update_column_type("f", "INT"), "Column type f[FLOAT] cannot be converted to INT"),
    (SchemaChange.update_column_type("v", "INT"), "Column type v[STRING] cannot be converted to INT"),
    (SchemaChange.add_column("v", "INT"), "Column v already exists in the db.t table."),
    (SchemaChange.add_column("z", "INT NOT NULL"), "Column z cannot specify NOT NULL in the db.t table."),
    (SchemaChange.rename_column("v", "n"), "Column n already exists in the db.t table."),
    (SchemaChange.drop_column("nope"), "Column nope does not exist in the db.t table"),
    (SchemaChange.drop_column("s"), "Cannot drop column s: option(s) ['sequence.field']"),
])
def test_refused_changes_leave_the_table_as_it_was(catalog, change, message):
    schema = pa.schema(list(KV) + [("dt", pa.string()), ("s", pa.int64())])
    t = catalog.create_table("db.t", schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                             options={"sequence.field": "s"})
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"], "n": pa.array([1], pa.int32()),
                      "f": pa.array([1.0], pa.float32()), "dt": ["d"], "s": pa.array([1], pa.int64())}))
    before = tree_digest(t.path)
    with pytest.raises(SchemaChangeError) as err:
        t.alter(change)
    assert message in str(err.value)
    assert tree_digest(t.path) == before
    assert t.schema().id == 0


def test_bad_change_arguments_are_refused(catalog):
    t = catalog.create_table("db.t", KV)
    with pytest.raises(SchemaChangeError, match="not a SchemaChange"):
        t.alter({"add": "x"})
    with pytest.raises(SchemaChangeError, match="no schema change"):
        t.alter()
    with pytest.raises(PaimonError, match="ARRAY<INT>"):
        SchemaChange.add_column("x", "ARRAY<INT>")
    with pytest.raises(SchemaChangeError, match="Cannot drop all fields"):
        catalog.create_table("db.one", pa.schema([("a", pa.int64())])).alter(SchemaChange.drop_column("a"))


@pytest.mark.parametrize("change, missing", [
    (SchemaChange("add", "x"), "type"),
    (SchemaChange("rename", "v"), "new_name"),
    (SchemaChange("update_type", "n"), "type"),
])
def test_a_change_built_without_its_factory_is_refused_when_incomplete(catalog, change, missing):
    t = catalog.create_table("db.t", KV)
    before = tree_digest(t.path)
    with pytest.raises(SchemaChangeError, match=f"has no {missing}; build it with SchemaChange"):
        t.alter(change)
    assert tree_digest(t.path) == before


@pytest.mark.parametrize("old, new, ok", [
    ("TINYINT", "SMALLINT", True), ("INT", "BIGINT", True), ("BIGINT", "INT", False), ("INT", "DOUBLE", True),
    ("BIGINT", "DOUBLE", False), ("SMALLINT", "FLOAT", True), ("INT", "FLOAT", False), ("FLOAT", "DOUBLE", True),
    ("DOUBLE", "FLOAT", False), ("INT", "DECIMAL(10, 0)", True), ("INT", "DECIMAL(10, 2)", False),
    ("DECIMAL(10, 2)", "DECIMAL(12, 4)", True), ("DECIMAL(10, 2)", "DECIMAL(12, 1)", False),
    ("VARCHAR(10)", "VARCHAR(20)", True), ("VARCHAR(20)", "VARCHAR(10)", False), ("CHAR(3)", "STRING", True),
    ("STRING", "CHAR(3)", False), ("BINARY(4)", "BYTES", True), ("TIMESTAMP(3)", "TIMESTAMP(6)", True),
    ("TIMESTAMP(6)", "TIMESTAMP(3)", False), ("TIMESTAMP(6)", "TIMESTAMP(6) WITH LOCAL TIME ZONE", False),
    ("DATE", "TIMESTAMP(3)", False), ("STRING", "BYTES", False), ("INT NOT NULL", "BIGINT", True),
])
def test_widens(old, new, ok):
    assert widens(old, new) is ok


def test_files_of_an_explicit_narrowing_by_another_engine_are_read_as_java_casts(catalog):
    """Paimon allows BIGINT -> INT (explicit cast) unless disabled; the old files then read through the cast."""
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("n", pa.int64())]), primary_keys=["id"])
    t.write(pa.table({"id": pa.array([1, 2], pa.int64()), "n": pa.array([5, 2**32 + 3], pa.int64())}))
    _retype_by_another_engine(t, 1, "INT")
    t = catalog.get_table("db.t")
    assert [r["n"] for r in rows(t)] == [5, 3]     # Java's (int) narrowing keeps the low 32 bits


def test_unreadable_type_change_names_the_file_and_column(catalog):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    t.write(pa.table({"id": pa.array([1], pa.int64()), "s": ["not a number"]}))
    _retype_by_another_engine(t, 1, "INT")
    with pytest.raises(PaimonError, match=r"data-.*\.parquet: column 's' was written as string and cannot be read"):
        catalog.get_table("db.t").read()


def test_alter_with_a_fresh_catalog_object_sees_the_new_schema(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", KV, primary_keys=["id"])
    t.write(kv_rows([1, 2]))
    new = t.alter(SchemaChange.rename_column("v", "w"))
    assert new.id == 1 and t.schema() is new
    assert Catalog(str(tmp_path / "wh")).get_table("db.t").arrow_schema().names == ["id", "w", "n", "f"]
