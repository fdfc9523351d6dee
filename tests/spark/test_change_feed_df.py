"""The change feed as a Spark DataFrame has the rows and columns of the library's `Table.changes` in every mode,
and the library's errors, raised before any job."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.changes.ranges import ChangeModeError
from airflow_paimon.spark import read_change_feed_df

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])


def kv(data) -> pa.Table:
    cols = list(zip(*data))
    return pa.table({f.name: pa.array(c, f.type) for f, c in zip(SCHEMA, cols)}, schema=SCHEMA)


def rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def test_change_feed_df_equals_the_librarys_feed_in_every_mode(spark, tmp_path):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"],
                             options={"bucket": "2", "changelog-producer": "lookup"})
    t.write(kv([(k, "xy"[k % 2], k) for k in range(20)]))
    t.create_tag("first")
    t.write(kv([(1, "y", 10), (2, "x", 20), (30, "x", 30)]))
    t.delete(kv([(3, "y", 0), (4, "x", 0)]).select(["k", "p"]))
    t.write(kv([(2, "x", 21), (5, "y", 5)]))
    t.create_tag("second")
    cases = [dict(start=0, mode="changelog"), dict(start=1, mode="delta"), dict(start="first", end="second"),
             dict(start=1, mode="diff", columns=["v", "k"]), dict(start=2, mode="auto"),
             dict(start=0, mode="changelog", filter=ds.field("v") > 4)]
    seen = set()
    for case in cases:
        want = t.changes(**case).read_all()
        got = read_change_feed_df(spark, t, **case)
        assert got.columns == want.column_names, case
        assert want.num_rows and rows(got.toArrow()) == rows(want), case
        seen |= set(want.column("_change_type").to_pylist())
    assert seen == {"insert", "update_preimage", "update_postimage", "delete"}
    assert read_change_feed_df(spark, t, "second", "second").count() == 0
    plain = catalog.create_table("db.plain", SCHEMA, primary_keys=["k", "p"], options={"bucket": "2"})
    plain.write(kv([(1, "x", 1)]))
    with pytest.raises(ChangeModeError, match="diff"):
        read_change_feed_df(lambda: None, plain, 0, mode="changelog")  # refused on the driver, before any job


def test_change_feed_df_gives_an_append_tables_vector_deletes_as_the_library_does(spark, tmp_path):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    t = catalog.create_table("db.events", SCHEMA, partition_keys=["p"],
                             options={"deletion-vectors.enabled": "true", "bucket": "2", "bucket-key": "k"})
    t.write(kv([(k, "xy"[k % 2], k) for k in range(20)]))
    t.delete(pa.table({"k": pa.array([3, 4, 11], pa.int64())}))
    t.update(kv([(5, "y", 50), (40, "x", 40)]), on=["k"])
    want = t.changes(0, mode="delta").read_all()
    assert want.column("_change_type").to_pylist().count("delete") == 4
    got = read_change_feed_df(spark, t, 0, mode="delta", num_tasks=3)
    assert rows(got.toArrow()) == rows(want)
