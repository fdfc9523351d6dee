"""Bad input gets an error that names the problem, and the table's files stay byte-for-byte as they were."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import (
    InvalidDataError,
    InvalidOptionError,
    PaimonError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TagNotFoundError,
    UnsupportedTableError,
)

from .conftest import ORDERS, orders
from .upkeep_helpers import tree_digest


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "2"})
    t.write(orders(range(5)))
    return t


@pytest.mark.parametrize("data, error, message", [
    (pa.table({"id": [1], "dt": ["x"], "name": ["a"], "amount": [1.0], "extra": [1]}), SchemaMismatchError, "extra"),
    (pa.table({"id": [1], "dt": ["x"], "name": ["a"]}), SchemaMismatchError, "amount"),
    (pa.table({"id": [1], "dt": ["x"], "name": ["a"], "amount": ["not a number"]}), SchemaMismatchError, "amount"),
    (pa.table({"id": pa.array([1, None], pa.int64()), "dt": ["x", "y"], "name": ["a", "b"], "amount": [1.0, 2.0]}),
     InvalidDataError, "primary key"),
])
def test_bad_writes_change_nothing(table, data, error, message):
    before = tree_digest(table.path)
    with pytest.raises(error, match=message):
        table.write(data)
    assert tree_digest(table.path) == before


def test_delete_without_key_columns(table):
    before = tree_digest(table.path)
    with pytest.raises(SchemaMismatchError, match="id"):
        table.delete(pa.table({"name": ["a"]}))
    assert tree_digest(table.path) == before


def test_unknown_snapshot_and_tag(table):
    before = tree_digest(table.path)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 99"):
        table.read(snapshot_id=99)
    with pytest.raises(TagNotFoundError, match="nope"):
        table.read(tag="nope")
    with pytest.raises(SnapshotNotFoundError,
                       match="no snapshot committed at or before 2001-01-01 00:00:00.000Z: its first commit"):
        table.read(as_of="2001-01-01")
    with pytest.raises(SchemaMismatchError, match="nothing"):
        table.read(columns=["nothing"])
    assert tree_digest(table.path) == before


@pytest.mark.parametrize("kwargs, error, message", [
    ({"primary_keys": ["id"], "options": {"bucket": "0"}}, InvalidOptionError, "bucket"),
    ({"primary_keys": ["id"], "options": {"bucket": "-1", "bucket-key": "id"}}, UnsupportedTableError,
     "dynamic-bucket"),
    ({"primary_keys": ["id"], "options": {"bucket": "-1", "dynamic-bucket.max-buckets": "0"}}, InvalidOptionError,
     "dynamic-bucket.max-buckets"),
    ({"primary_keys": ["id"], "options": {"bucket": "-1", "dynamic-bucket.target-row-num": "0"}},
     InvalidOptionError, "dynamic-bucket.target-row-num"),
    ({"primary_keys": ["id"], "options": {"bucket": "x"}}, InvalidOptionError, "bucket"),
    ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "aggregation"}}, UnsupportedTableError,
     "merge-engine"),
    ({"primary_keys": ["id"], "options": {"bucket": "2", "file.format": "orc"}}, UnsupportedTableError, "orc"),
    ({"primary_keys": ["id"], "options": {"bucket": "2", "snapshot.num-retained.min": "-1"}}, InvalidOptionError,
     "snapshot.num-retained.min"),
    ({"primary_keys": ["id"], "options": {"bucket": "2", "snapshot.time-retained": "soon"}}, InvalidOptionError,
     "snapshot.time-retained"),
    ({"primary_keys": ["missing"]}, InvalidOptionError, "missing"),
    ({"primary_keys": ["dt"], "partition_keys": ["dt"]}, InvalidOptionError, "partition"),
    ({"partition_keys": ["dt"], "options": {"bucket": "4"}}, UnsupportedTableError, "bucket"),
])
def test_bad_tables_are_refused_before_anything_is_written(catalog, kwargs, error, message):
    before = tree_digest(catalog.warehouse)
    with pytest.raises(error, match=message):
        catalog.create_table("db.bad", ORDERS, **kwargs)
    assert tree_digest(catalog.warehouse) == before
    assert not catalog.table_exists("db.bad")


def test_unsupported_types_are_refused(catalog):
    with pytest.raises(UnsupportedTableError, match="column 'xs': Arrow type time32"):
        catalog.create_table("db.nested", pa.schema([("id", pa.int64()), ("xs", pa.list_(pa.time32("s")))]))
    with pytest.raises(UnsupportedTableError, match="column 't': Arrow type time32"):
        catalog.create_table("db.nested", pa.schema([("id", pa.int64()), ("t", pa.time32("s"))]))
    assert not catalog.table_exists("db.nested")


def test_a_table_with_an_unsupported_column_type_opens_but_refuses_reads_and_writes(catalog, tmp_path):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "1"})
    t.write(orders([1, 2]))
    schema_file = f"{t.path}/schema/schema-0"
    text = open(schema_file).read().replace('"type": "DOUBLE"', '"type": "ARRAY<INT>"')
    open(schema_file, "w").write(text)
    t = catalog.get_table("db.orders")
    assert [s.id for s in t.snapshots()] == [1]
    before = tree_digest(t.path)
    with pytest.raises(UnsupportedTableError, match="cannot read db.orders: column 'amount'.*ARRAY<INT>"):
        t.read()
    with pytest.raises(UnsupportedTableError, match="cannot write to db.orders: column 'amount'.*ARRAY<INT>"):
        t.write(orders([3]))
    assert tree_digest(t.path) == before


def test_bad_identifier(catalog):
    with pytest.raises(PaimonError, match="database.table"):
        catalog.get_table("no_dot")
