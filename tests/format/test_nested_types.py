"""ARRAY, MAP and ROW columns: stored as Paimon stores them (JSON type objects in the schema file, Parquet field
ids on nested fields), read and written with nulls at every level, merged on read, compacted, and in the change
feed and the changelog producers; refused in primary and partition keys as Paimon refuses them."""

from __future__ import annotations

import glob
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog, InvalidOptionError, SchemaChange, SchemaChangeError

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
    pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    pa.field("point", pa.struct([pa.field("x", pa.int32()),
                                 pa.field("inner", pa.struct([pa.field("ys", pa.list_(pa.float64()))]))])),
])


def rows(ids, v: int) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "tags": [None if i % 3 == 0 else [f"t{i}", f"v{v}"] for i in ids],
        "attrs": [[("k", i), ("n", None)] if i % 2 else None for i in ids],
        "point": [None if i % 4 == 0 else {"x": None if i % 5 == 0 else v, "inner": {"ys": [float(i), None]}}
                  for i in ids],
    }, schema=SCHEMA)


def by_id(t: pa.Table) -> dict:
    return {r["id"]: r for r in t.to_pylist()}


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def test_schema_file_holds_paimon_json_types_and_nested_ids(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    doc = json.load(open(f"{t.path}/schema/schema-0"))
    fields = {f["name"]: f for f in doc["fields"]}
    assert fields["tags"]["type"] == {"type": "ARRAY", "element": "STRING NOT NULL"}
    assert fields["attrs"]["type"] == {"type": "MAP", "key": "STRING NOT NULL", "value": "BIGINT"}
    point = fields["point"]["type"]
    assert point["type"] == "ROW" and [f["name"] for f in point["fields"]] == ["x", "inner"]
    nested_ids = [point["fields"][0]["id"], point["fields"][1]["id"], point["fields"][1]["type"]["fields"][0]["id"]]
    top_ids = [f["id"] for f in doc["fields"]]
    assert len(set(nested_ids + top_ids)) == 7 and doc["highestFieldId"] == max(nested_ids + top_ids)
    assert catalog.get_table("db.t").schema().logical_arrow_schema() == SCHEMA


def test_nested_values_with_nulls_merge_on_read_and_compact(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    t.write(rows(range(0, 20), 1))
    t.write(rows(range(10, 30), 2))
    t.delete(pa.table({"id": pa.array([0, 11], pa.int64())}))
    expected = by_id(rows(range(0, 20), 1)) | by_id(rows(range(10, 30), 2))
    del expected[0], expected[11]
    assert by_id(t.read()) == expected
    t.maintenance.compact()
    assert by_id(t.read()) == expected
    assert by_id(t.read(snapshot_id=1)) == by_id(rows(range(0, 20), 1))


def test_data_files_carry_paimon_field_ids_on_nested_fields(catalog):
    t = catalog.create_table("db.t", SCHEMA, options={})
    t.write(rows(range(4), 1))
    [path] = glob.glob(f"{t.path}/bucket-0/*.parquet")
    schema = pq.read_schema(path)
    ids = {f["name"]: f["id"] for f in json.load(open(f"{t.path}/schema/schema-0"))["fields"]}
    base, depth_limit = (2**31 - 1) // 4, 1 << 10
    tags = schema.field("tags")
    assert int(tags.type.value_field.metadata[b"PARQUET:field_id"]) == base + ids["tags"] * depth_limit + 1
    attrs = schema.field("attrs").type
    assert int(attrs.key_field.metadata[b"PARQUET:field_id"]) == base - ids["attrs"] * depth_limit - 1
    assert int(attrs.item_field.metadata[b"PARQUET:field_id"]) == base + ids["attrs"] * depth_limit + 1
    point = json.load(open(f"{t.path}/schema/schema-0"))["fields"][3]["type"]
    assert int(schema.field("point").type.field("x").metadata[b"PARQUET:field_id"]) == point["fields"][0]["id"]
    assert by_id(t.read()) == by_id(rows(range(4), 1))


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_change_feed_and_changelog_producers_carry_nested_values(catalog, producer):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"],
                             options={"bucket": "1", "changelog-producer": producer})
    t.write(rows(range(0, 6), 1))
    first = t.latest_snapshot().id
    t.write(rows(range(4, 8), 2))
    last = t.latest_snapshot().id
    changed = t.changes(first, last, mode="diff").read_all().to_pylist()
    post = {r["id"]: r for r in changed if r["_change_type"] in ("update_postimage", "insert")}
    assert {i: {k: post[i][k] for k in SCHEMA.names} for i in post} == by_id(rows(range(4, 8), 2))
    pre = {r["id"]: r for r in changed if r["_change_type"] == "update_preimage"}
    assert {i: {k: pre[i][k] for k in SCHEMA.names} for i in pre} == by_id(rows(range(4, 6), 1))
    feed = t.changes(first, last, mode="changelog").read_all().to_pylist()
    assert {r["id"] for r in feed if r["_change_type"] != "update_preimage"} == set(range(4, 8))


@pytest.mark.parametrize("keys", [{"primary_keys": ["tags", "id"]}, {"partition_keys": ["point"]}])
def test_nested_keys_are_refused_as_paimon_refuses_them(catalog, keys):
    with pytest.raises(InvalidOptionError, match="has the nested type .*; Paimon allows only atomic types"):
        catalog.create_table("db.t", SCHEMA, **keys)
    assert not catalog.table_exists("db.t")


def test_schema_changes_of_nested_columns_are_refused_clearly(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    with pytest.raises(SchemaChangeError, match="column 'tags'.*nested"):
        t.alter(SchemaChange.update_column_type("tags", pa.list_(pa.int64())))
    with pytest.raises(SchemaChangeError, match="column 'more'.*nested"):
        t.alter(SchemaChange.add_column("more", pa.list_(pa.int64())))
    assert t.schema().id == 0


def test_nested_values_compare_element_by_element_with_nulls_equal():
    from airflow_paimon.format.kernels import null_safe_equal
    a = rows(range(12), 1)
    b = rows(range(12), 1)
    for name in SCHEMA.names[1:]:
        assert null_safe_equal(a.column(name), b.column(name)).all(), name
    changed = rows(range(12), 2)  # only values inside tags and point change
    assert list(null_safe_equal(a.column("tags"), changed.column("tags"))) == [i % 3 == 0 for i in range(12)]
    assert list(null_safe_equal(a.column("point"), changed.column("point"))) == \
        [i % 4 == 0 or i % 5 == 0 for i in range(12)]
    assert null_safe_equal(a.column("attrs"), changed.column("attrs")).all()
    shorter = pa.array([[("k", 1)], [("k", 1), ("n", None)], None], SCHEMA.field("attrs").type)
    longer = pa.array([[("k", 1), ("n", None)], [("k", 1), ("n", 2)], []], SCHEMA.field("attrs").type)
    assert list(null_safe_equal(shorter, longer)) == [False, False, False]
