"""System tables: Paimon's Java column names, order, types and nullability; values of a small table."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog, InvalidOptionError
from airflow_paimon.format.system_tables import system_table

from .upkeep_helpers import make_table, upsert

TS = pa.timestamp("ms")

# (name, type, nullable) as declared in org.apache.paimon.table.system.*Table.TABLE_TYPE
JAVA_COLUMNS = {
    "snapshots": [("snapshot_id", pa.int64(), False), ("schema_id", pa.int64(), False),
                  ("commit_user", pa.string(), False), ("commit_identifier", pa.int64(), False),
                  ("commit_kind", pa.string(), False), ("commit_time", TS, False),
                  ("base_manifest_list", pa.string(), False), ("delta_manifest_list", pa.string(), False),
                  ("changelog_manifest_list", pa.string(), True), ("total_record_count", pa.int64(), True),
                  ("delta_record_count", pa.int64(), True), ("changelog_record_count", pa.int64(), True),
                  ("watermark", pa.int64(), True), ("next_row_id", pa.int64(), True),
                  ("operation", pa.string(), True), ("writer_version", pa.string(), True)],
    "tags": [("tag_name", pa.string(), False), ("snapshot_id", pa.int64(), False),
             ("schema_id", pa.int64(), False), ("commit_time", TS, False), ("record_count", pa.int64(), True),
             ("create_time", TS, True), ("time_retained", pa.string(), True)],
    "files": [("partition", pa.string(), True), ("bucket", pa.int32(), False),
              ("file_path", pa.string(), False), ("file_format", pa.string(), False),
              ("schema_id", pa.int64(), False), ("level", pa.int32(), False),
              ("record_count", pa.int64(), False), ("file_size_in_bytes", pa.int64(), False),
              ("min_key", pa.string(), True), ("max_key", pa.string(), True),
              ("null_value_counts", pa.string(), False), ("min_value_stats", pa.string(), False),
              ("max_value_stats", pa.string(), False), ("min_sequence_number", pa.int64(), True),
              ("max_sequence_number", pa.int64(), True), ("creation_time", TS, True),
              ("deleteRowCount", pa.int64(), True), ("file_source", pa.string(), True),
              ("first_row_id", pa.int64(), True), ("write_cols", pa.list_(pa.string()), True)],
    "manifests": [("file_name", pa.string(), False), ("file_size", pa.int64(), False),
                  ("num_added_files", pa.int64(), False), ("num_deleted_files", pa.int64(), False),
                  ("schema_id", pa.int64(), False), ("min_partition_stats", pa.string(), True),
                  ("max_partition_stats", pa.string(), True), ("min_row_id", pa.int64(), True),
                  ("max_row_id", pa.int64(), True)],
    "schemas": [("schema_id", pa.int64(), False), ("fields", pa.string(), False),
                ("partition_keys", pa.string(), False), ("primary_keys", pa.string(), False),
                ("options", pa.string(), False), ("comment", pa.string(), True), ("update_time", TS, False)],
    "options": [("key", pa.string(), False), ("value", pa.string(), False)],
}


@pytest.fixture
def table(tmp_path):
    t = make_table(tmp_path, partitioned=True, options={"tag.default-time-retained": "2 d"})
    upsert(t, [1, 2, 3], 10, p="x")
    upsert(t, [2, 9], 20, p="y")
    t.tags.create("first", snapshot_id=1)
    t.tags.create("later")
    upsert(t, [1, 2, 3], 30, p="x")
    assert t.maintenance.compact() is not None
    return t


@pytest.mark.parametrize("name", sorted(JAVA_COLUMNS))
def test_schemas_match_java(table, name):
    for key in (name, "$" + name, name.upper()):
        got = system_table(table, key)
        assert [(f.name, f.type, f.nullable) for f in got.schema] == JAVA_COLUMNS[name]


def test_snapshots(table):
    s = table.inspect.snapshots().to_pylist()
    assert [r["snapshot_id"] for r in s] == [1, 2, 3, 4]
    assert [r["commit_kind"] for r in s] == ["APPEND", "APPEND", "APPEND", "COMPACT"]
    assert [r["total_record_count"] for r in s][:3] == [3, 5, 8]
    snap = table.snapshot(2)
    assert s[1]["commit_time"] == dt.datetime.fromtimestamp(snap.time_millis / 1000).replace(
        microsecond=snap.time_millis % 1000 * 1000)
    assert s[1]["base_manifest_list"] == snap.base_manifest_list


def test_tags(table):
    rows = table.inspect.tags().to_pylist()
    assert [r["tag_name"] for r in rows] == ["first", "later"]          # by name, as Java's TreeMap
    assert [r["snapshot_id"] for r in rows] == [1, 2]
    assert rows[0]["record_count"] == 3 and rows[0]["time_retained"] == "PT48H"
    assert isinstance(rows[0]["create_time"], dt.datetime)


def test_files_latest_and_time_travel(table):
    latest = table.inspect.files().to_pylist()
    assert {r["level"] for r in latest} == {5} or all(r["file_source"] in ("APPEND", "COMPACT") for r in latest)
    assert sum(r["record_count"] for r in latest) == 5
    assert {r["partition"] for r in latest} == {"{x}", "{y}"}
    assert all(r["file_format"] == "parquet" for r in latest)
    assert all(r["file_path"].startswith(table.path + "/p=") for r in latest)
    first = table.inspect.files(tag="first").to_pylist()
    assert len(first) >= 1 and all(r["file_source"] == "APPEND" for r in first)
    r = [x for x in first if x["record_count"] == max(y["record_count"] for y in first)][0]
    assert r["min_key"].startswith("[") and r["null_value_counts"].startswith("{id=0, p=0, v=0")
    assert r["min_value_stats"].startswith("{id=") and "p=x" in r["min_value_stats"]
    assert table.inspect.files(snapshot_id=2).num_rows >= table.inspect.files(tag="first").num_rows


def test_partitions_sum_the_live_files_of_each_partition(table):
    got = table.inspect.partitions()
    assert [(f.name, f.type, f.nullable) for f in got.schema] == [
        ("partition", pa.string(), True), ("record_count", pa.int64(), False),
        ("file_size_in_bytes", pa.int64(), False), ("file_count", pa.int64(), False),
        ("last_update_time", TS, True)]
    for kwargs in ({}, {"tag": "first"}, {"snapshot_id": 2}):
        files = table.inspect.files(**kwargs).to_pylist()
        expected = {}
        for f in files:
            name = "p=" + f["partition"].strip("{}")
            n, size, count, newest = expected.get(name, (0, 0, 0, f["creation_time"]))
            expected[name] = (n + f["record_count"], size + f["file_size_in_bytes"], count + 1,
                              max(newest, f["creation_time"]))
        rows = table.inspect.partitions(**kwargs).to_pylist()
        assert {r["partition"]: (r["record_count"], r["file_size_in_bytes"], r["file_count"], r["last_update_time"])
                for r in rows} == expected, kwargs
    assert [r["partition"] for r in table.inspect.partitions(tag="first").to_pylist()] == ["p=x"]
    assert [r["partition"] for r in table.inspect.partitions().to_pylist()] == ["p=x", "p=y"]


def test_partitions_of_nulls_and_of_an_empty_table(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("q", pa.int32())])
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    t = catalog.create_table("db.log", schema, partition_keys=["p", "q"])
    assert t.inspect.partitions().num_rows == 0
    t.write(pa.table({"id": [1, 2, 3], "p": [None, "a", "a"], "q": [1, None, 2]}, schema=schema))
    assert t.inspect.partitions().column("partition").to_pylist() == [
        "p=__DEFAULT_PARTITION__/q=1", "p=a/q=2", "p=a/q=__DEFAULT_PARTITION__"]


def test_manifests(table):
    m = table.inspect.manifests().to_pylist()
    assert m and all(r["file_name"].startswith("manifest-") for r in m)
    assert sum(r["num_added_files"] for r in m) >= 1
    assert {r["min_partition_stats"] for r in m} <= {"{x}", "{y}"}


def test_schemas_and_options(table):
    s = table.inspect.schemas().to_pylist()
    assert s[0]["schema_id"] == 0
    assert json.loads(s[0]["fields"])[0] == {"id": 0, "name": "id", "type": "BIGINT NOT NULL"}
    assert json.loads(s[0]["partition_keys"]) == ["p"] and json.loads(s[0]["primary_keys"]) == ["p", "id"]
    assert "," in s[0]["options"] and ": " not in s[0]["options"]   # flat JSON, as Java's toFlatJson
    o = table.inspect.options().to_pylist()
    assert {"key": "tag.default-time-retained", "value": "2 d"} in o
    assert [r["key"] for r in o] == sorted(r["key"] for r in o)


def test_empty_table(tmp_path):
    t = make_table(tmp_path)
    for name in JAVA_COLUMNS:
        got = getattr(t.inspect, name)()
        assert [f.name for f in got.schema] == [c[0] for c in JAVA_COLUMNS[name]]
    assert t.inspect.snapshots().num_rows == 0 and t.inspect.files().num_rows == 0


def test_unknown_and_bad_travel(table):
    with pytest.raises(InvalidOptionError, match="unknown system table"):
        system_table(table, "audit_logs")
    with pytest.raises(InvalidOptionError, match="no time travel"):
        system_table(table, "tags", snapshot_id=1)
