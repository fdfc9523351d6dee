"""The library and Spark keep the same version of each key: Paimon's sequence.field order (a NULL is the oldest
value, either sort order), duplicates within one write, and rowkind.field, checked against one expected answer."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.merge import matched_update, not_matched_insert
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.spark.tables import read_table_df, write_changes

from .reference import canonical, clause, merge_rows, older

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64()), ("op", pa.string())])
COLUMNS = SCHEMA.names
UPSERT = [clause("matched", "update", None, "*"), clause("not_matched", "insert", None, "*")]

# id: (target seq, source seq); "-" = no row on that side.
CASES = {0: (None, 5), 1: (5, None), 2: (5, 3), 3: (None, None), 4: (5, 7), 5: (5, 5), 6: ("-", None), 7: (5, "-")}


def rows(side: int, version: str) -> list[dict]:
    return [{"id": i, "v": f"{version}{i}", "seq": seqs[side], "op": "+I"}
            for i, seqs in CASES.items() if seqs[side] != "-"]


def create(cat, name, order, **extra):
    options = {"bucket": "2", "sequence.field": "seq", "sequence.field.sort-order": order, **extra}
    return cat.create_table(name, SCHEMA, primary_keys=["id"], options=options)


def spark_rows(spark, cat, name):
    return read_table_df(spark, cat.get_table(name)).toArrow().to_pylist()


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_library_and_spark_merges_keep_the_same_versions(spark, warehouse, tmp_path, order):
    cat = warehouse
    target, source = rows(0, "t"), rows(1, "s")
    expected = merge_rows(target, source, ["id"], UPSERT, COLUMNS, seq_fields=["seq"],
                          descending=order == "descending")
    # The answer spelled out for ascending order: a NULL never beats a value, equal values go to the later write.
    if order == "ascending":
        assert {r["id"]: r["v"] for r in expected} == {0: "s0", 1: "t1", 2: "t2", 3: "s3", 4: "s4", 5: "s5",
                                                       6: "s6", 7: "t7"}
    src = str(tmp_path / "source.parquet")
    pq.write_table(pa.Table.from_pylist(source, schema=SCHEMA), src)
    for name in ("db.lib", "db.upsert", "db.merge"):
        create(cat, name, order).write(pa.Table.from_pylist(target, schema=SCHEMA))
    # The library: the source written as the next changes, merge-on-read picks the versions.
    cat.get_table("db.lib").write(pa.Table.from_pylist(source, schema=SCHEMA))
    # Spark: a plain upsert (no target read) and a conditional merge (its matched clause guarded by the order).
    spec = {"warehouse": cat.warehouse, "source": src, "commit_user": "test", "commit_identifier": 1,
            "driver_bytes": 0}
    up = run_merge(spark, dict(spec, target="db.upsert"))
    assert up["engine"] == "spark" and up["mode"] == "upsert"
    clauses = [matched_update(set="*", condition="s.v IS NOT NULL"), not_matched_insert()]
    merged = run_merge(spark, json.loads(json.dumps(dict(spec, target="db.merge",
                                                         clauses=[c.to_dict() for c in clauses]))))
    assert merged["mode"] == "merge" and merged["sequence_guard"] == ["seq"]
    skipped = sum(1 for s in source for t in target if s["id"] == t["id"] and
                  older(s, t, ["seq"], order == "descending"))
    assert merged["rows"]["updated"] == sum(1 for s in source if s["id"] in {t["id"] for t in target}) - skipped
    want = canonical(expected, ["id"])
    for name in ("db.lib", "db.upsert", "db.merge"):
        assert canonical(cat.get_table(name).read().to_pylist(), ["id"]) == want, name
        assert canonical(spark_rows(spark, cat, name), ["id"]) == want, name


def test_one_write_with_several_rows_per_key_keeps_the_same_row_in_the_library_and_on_spark(spark, warehouse):
    cat = warehouse
    # Versions of one key, in write order: (seq, op). The newest by Paimon's order wins, its kind decides.
    versions = {
        0: [(3, "+I"), (1, "+U"), (None, "-D")],        # 3 is newest
        1: [(None, "+I"), (2, "-D")],                   # the delete is newest: key 1 goes
        2: [(None, "+I"), (None, "+U")],                # equal: the later row
        3: [(4, "-D"), (4, "+U")],                      # equal: the later row
        4: [(9, "-d"), (1, "+I")],                      # Paimon reads the kind case-insensitively
        5: [(None, "+I")],
    }
    batch = [{"id": i, "v": f"r{i}-{j}", "seq": s, "op": op}
             for i, vs in versions.items() for j, (s, op) in enumerate(vs)]
    expected = []
    for i, vs in versions.items():
        j = max(range(len(vs)), key=lambda j: (vs[j][0] is not None, vs[j][0] or 0, j))
        if vs[j][1].upper() not in ("-D", "-U"):
            expected.append({"id": i, "v": f"r{i}-{j}", "seq": vs[j][0], "op": vs[j][1]})
    base = [{"id": i, "v": "base", "seq": None, "op": "+I"} for i in range(6)]   # older than, or as old as, any
    lib = create(cat, "db.lib", "ascending", **{"rowkind.field": "op"})
    on_spark = create(cat, "db.spark", "ascending", **{"rowkind.field": "op"})
    for t in (lib, on_spark):
        t.write(pa.Table.from_pylist(base, schema=SCHEMA))
    lib.write(pa.Table.from_pylist(batch, schema=SCHEMA))
    df = spark.createDataFrame(batch, schema="id long, v string, seq long, op string")
    res = write_changes(spark, cat.get_table("db.spark"), df, kind_column=None, duplicates="last")
    assert res.rows == {"inserted": 2, "updated": 2, "deleted": 2}
    want = canonical(expected, ["id"])
    assert canonical(cat.get_table("db.lib").read().to_pylist(), ["id"]) == want
    assert canonical(cat.get_table("db.spark").read().to_pylist(), ["id"]) == want
