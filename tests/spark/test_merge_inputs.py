"""What the merge makes of unusual input: source types Spark's MERGE would not store, and an empty increment.

Types follow Spark's ANSI store assignment on both paths (the driver and Spark): numbers into numbers, anything
atomic into strings, dates and timestamps among themselves; a string into a double fails naming the column and
both types, and nothing is committed.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.merge import matched_delete, matched_update, not_matched_by_source_delete, not_matched_insert
from airflow_paimon.spark.merge import run_merge
from airflow_paimon.store_assignment import StoreAssignmentError, can_store_assign

from .reference import canonical, clause, merge_rows
from .test_merge import COLUMNS, SCHEMA, make_target, row, write_source

pytestmark = pytest.mark.spark

STRING_AMOUNT = pa.schema([pa.field("amount", pa.string()) if f.name == "amount" else f for f in SCHEMA])


def _spark_never():
    raise AssertionError("the driver path asked for Spark")


def _merge(spark, cat, source, **extra):
    spec = {"target": "db.t", "warehouse": cat.warehouse, "source": source, "commit_user": "test",
            "commit_identifier": 1}
    spec.update(extra)
    return run_merge(spark, spec)


def _string_amount_rows():
    return [dict(row(i, 1), amount=str(float(i))) for i in range(38, 42)]


def test_the_store_assignment_rules_are_sparks():
    ok = [(pa.int32(), pa.int64()), (pa.int64(), pa.int32()), (pa.float64(), pa.decimal128(10, 2)),
          (pa.int64(), pa.float64()), (pa.int64(), pa.string()), (pa.bool_(), pa.string()),
          (pa.timestamp("us"), pa.string()), (pa.date32(), pa.timestamp("us")),
          (pa.timestamp("us", tz="UTC"), pa.timestamp("us")), (pa.null(), pa.int64()),
          (pa.large_string(), pa.string())]
    refused = [(pa.string(), pa.float64()), (pa.string(), pa.int64()), (pa.string(), pa.timestamp("us")),
               (pa.string(), pa.date32()), (pa.string(), pa.bool_()), (pa.int64(), pa.bool_()),
               (pa.bool_(), pa.int32()), (pa.float64(), pa.date32()), (pa.binary(), pa.int64()),
               (pa.string(), pa.binary()), (None, pa.int64())]
    assert [pair for pair in ok if not can_store_assign(*pair)] == []
    assert [pair for pair in refused if can_store_assign(*pair)] == []


def test_a_string_column_into_a_double_column_is_refused_by_the_driver(warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    path = write_source(tmp_path, _string_amount_rows(), "strings.parquet", STRING_AMOUNT)
    with pytest.raises(StoreAssignmentError, match=r"cannot store a string value into the double target column "
                                                   r"'amount'.*Nothing was committed"):
        _merge(_spark_never, cat, path)
    assert len(cat.get_table("db.t").snapshots()) == 1


@pytest.mark.parametrize("clauses", [None, [matched_update(set="*", condition="s.name <> t.name"),
                                            not_matched_insert(values="*")]], ids=["upsert", "merge"])
def test_a_string_column_into_a_double_column_is_refused_on_spark(spark, warehouse, tmp_path, clauses):
    cat = warehouse
    make_target(cat)
    before = cat.get_table("db.t").read().to_pylist()
    path = write_source(tmp_path, _string_amount_rows(), "strings.parquet", STRING_AMOUNT)
    extra = {"driver_bytes": 0}
    if clauses is not None:
        extra["clauses"] = [c.to_dict() for c in clauses]
    with pytest.raises(StoreAssignmentError, match="cannot store a string value into the double target column "
                                                   "'amount'"):
        _merge(spark, cat, path, **extra)
    t = cat.get_table("db.t")
    assert len(t.snapshots()) == 1
    assert canonical(t.read().to_pylist(), ["id"]) == canonical(before, ["id"])


def test_an_assigned_expression_of_the_wrong_type_is_refused_and_widening_is_stored(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    path = write_source(tmp_path, [row(i, 1) for i in range(38, 42)])
    bad = [matched_update(set={"amount": "s.name"}).to_dict()]
    with pytest.raises(StoreAssignmentError, match=r"WHEN MATCHED THEN UPDATE \(amount\): cannot store a string "
                                                   r"value into the double target column 'amount'"):
        _merge(spark, cat, path, clauses=bad)
    # A number of another width (int -> double) and a number into a string column are stored, as in Spark.
    widened = [matched_update(set={"amount": "CAST(s.id AS INT)", "name": "s.id * 2"}).to_dict()]
    result = _merge(spark, cat, path, clauses=widened)
    assert result["status"] == "committed"
    got = {r["id"]: r for r in cat.get_table("db.t").read().to_pylist()}
    assert got[38]["amount"] == 38.0 and got[38]["name"] == "76"


def test_an_empty_increment_folder_with_clauses_on_source_columns_is_no_change(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat)
    before = cat.get_table("db.t").read().to_pylist()
    (tmp_path / "day").mkdir()
    (tmp_path / "day" / "_SUCCESS").write_text("")
    clauses = [matched_delete(condition="s.op = 'D'"), matched_update(set="*"),
               not_matched_insert(values="*", condition="s.op <> 'D'")]
    result = _merge(spark, cat, str(tmp_path / "day"), clauses=[c.to_dict() for c in clauses])
    assert result["status"] == "no_changes" and result["source"]["empty"]
    assert result["snapshot_id"] == 1 and result["rows"] == {"inserted": 0, "updated": 0, "deleted": 0}
    assert len(cat.get_table("db.t").snapshots()) == 1
    # NOT MATCHED BY SOURCE still applies to every target row of an empty source, as in Spark's MERGE.
    by_source = clauses + [not_matched_by_source_delete(condition="t.id < 5")]
    result = _merge(spark, cat, str(tmp_path / "day"), clauses=[c.to_dict() for c in by_source],
                    commit_identifier=2)
    assert result["status"] == "committed" and result["rows"]["deleted"] == 5
    expected = merge_rows(before, [], ["id"], [clause("not_matched_by_source", "delete", lambda s, t: t["id"] < 5)],
                          COLUMNS)
    assert canonical(cat.get_table("db.t").read().to_pylist(), ["id"]) == canonical(expected, ["id"])
