"""The in-process MERGE engine against the Spark application on the same data: the tables read back identically
(and in pypaimon, for a sample), and bad input fails on both with nothing written.

Spark's fixed cost per MERGE dominates a small one, so the statements of one table shape run as ONE MERGE per
engine: the target and the source carry a ``stmt`` partition column (part of the key), every row is repeated per
statement, and each statement's clauses get ``stmt = <its number> AND`` in front of their condition. A row of
statement k can only take a clause of statement k, so the first matching clause of each kind is the one it takes
when that statement runs alone; the comparison is made statement by statement.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import PaimonError
from airflow_paimon.local_merge.choose import merge_here_or_refuse
from airflow_paimon.merge import (
    matched_delete,
    matched_update,
    not_matched_by_source_delete,
    not_matched_by_source_update,
    not_matched_insert,
)
from airflow_paimon.spark.merge import merge_into
from tests.interop.test_format_interop import canonical, pypaimon_reads

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([
    pa.field("stmt", pa.int32(), False), pa.field("id", pa.int64(), False), pa.field("dt", pa.date32(), False),
    pa.field("name", pa.string()),
    pa.field("amount", pa.float64()), pa.field("qty", pa.int32()), pa.field("price", pa.decimal128(10, 2)),
    pa.field("ts", pa.timestamp("us")), pa.field("flag", pa.bool_()), pa.field("updated_at", pa.int64()),
])
SOURCE_SCHEMA = pa.schema([f.with_nullable(True) for f in SCHEMA] + [pa.field("op", pa.string())])
DAY = dt.date(2026, 11, 1)
T0 = dt.datetime(2026, 11, 1, 8, 0, 0)
NAMES = ["alpha", " Beta ", "gamma", None, "delta", "EPS"]

SHAPES = {
    "plain": {"pk": ["stmt", "id"], "partition": ["stmt"], "options": {"bucket": "4"}},
    "partitioned": {"pk": ["stmt", "id", "dt"], "partition": ["stmt", "dt"], "options": {"bucket": "2"}},
    "sequenced": {"pk": ["stmt", "id"], "partition": ["stmt"],
                  "options": {"bucket": "3", "sequence.field": "updated_at"}},
    "one_bucket": {"pk": ["stmt", "id"], "partition": ["stmt"], "options": {"bucket": "1"}},
}


def target_row(i: int) -> dict:
    return {"stmt": 0, "id": i, "dt": DAY + dt.timedelta(days=i % 3), "name": NAMES[i % len(NAMES)],
            "amount": None if i % 11 == 0 else i * 1.5, "qty": i % 7, "price": decimal.Decimal(f"{i}.25"),
            "ts": T0 + dt.timedelta(hours=i), "flag": i % 2 == 0, "updated_at": 100 + i}


def source_row(i: int) -> dict:
    r = target_row(i)
    r.update(name=NAMES[(i + 2) % len(NAMES)], amount=None if i % 13 == 0 else i * 2.0, qty=(i * 3) % 10,
             price=decimal.Decimal(f"{i}.75"), ts=T0 + dt.timedelta(hours=i, minutes=30),
             flag=None if i % 5 == 0 else i % 3 == 0, updated_at=100 + i + (-1 if i % 4 == 0 else 1),
             op=["U", "D", "I", None][i % 4])
    return r


TARGET_ROWS = [target_row(i) for i in range(40)]
SOURCE_ROWS = [source_row(i) for i in range(25, 55)]

U, D, INS = matched_update, matched_delete, not_matched_insert
BD, BU = not_matched_by_source_delete, not_matched_by_source_update

CORPUS: list[tuple[str, list]] = [
    ("plain", [U(), INS()]),
    ("plain", [U(condition="s.amount > t.amount"), INS()]),
    ("plain", [D(condition="s.op = 'D'"), U(), INS(condition="s.op <> 'D' OR s.op IS NULL")]),
    ("plain", [U(set={"amount": "s.amount + t.amount", "qty": "t.qty * 2 - s.qty"})]),
    ("plain", [U(set={"name": "upper(trim(s.name))"}, condition="s.name IS NOT NULL")]),
    ("plain", [U(set={"name": "concat(t.name, '-', s.name)"})]),
    ("plain", [U(set={"name": "s.name || '/' || t.name"}, condition="t.qty IN (1, 2, 3)")]),
    ("plain", [U(set={"qty": "CASE WHEN s.qty > t.qty THEN s.qty WHEN s.qty IS NULL THEN 0 ELSE t.qty END"})]),
    ("plain", [U(set={"amount": "coalesce(s.amount, t.amount, -1.0)"})]),
    ("plain", [U(set={"flag": "s.flag <=> t.flag"})]),
    ("plain", [U(set={"name": "'same'"}, condition="s.flag <=> t.flag")]),
    ("plain", [D(condition="s.amount IS NULL OR t.amount IS NULL")]),
    ("plain", [D(condition="NOT (s.qty BETWEEN 2 AND 5)"), INS(condition="s.qty BETWEEN 2 AND 5")]),
    ("plain", [U(set={"price": "s.price + t.price"}, condition="s.price > t.price")]),
    ("plain", [U(set={"price": "CAST(s.qty AS DECIMAL(10,2))"})]),
    ("plain", [U(set={"qty": "CAST(s.updated_at AS INT)", "name": "CAST(s.qty AS STRING)"})]),
    ("plain", [U(set={"ts": "s.ts"}, condition="s.ts > TIMESTAMP '2026-11-02 10:00:00'")]),
    ("plain", [U(set={"ts": "CAST('2027-01-01 00:00:00' AS TIMESTAMP)"}, condition="t.ts < s.ts")]),
    ("plain", [U(set={"dt": "date_add(t.dt, 3)"})]),
    ("plain", [U(set={"qty": "datediff(s.dt, DATE '2026-10-01')"})]),
    ("plain", [U(set={"qty": "year(s.dt) - 2000 + month(t.dt) + day(s.dt)"})]),
    ("plain", [D(condition="s.name LIKE '%a%'"), U(set={"name": "lower(s.name)"}), INS()]),
    ("plain", [U(set={"qty": "length(s.name)", "name": "substring(s.name, 2, 3)"})]),
    ("plain", [U(set={"amount": "abs(t.amount - s.amount)", "qty": "-s.qty"})]),
    ("plain", [U(set={"name": "if(s.qty > t.qty, 'up', 'down')"})]),
    ("plain", [INS(values={"stmt": "s.stmt", "id": "s.id", "dt": "s.dt", "name": "'new'", "qty": "s.qty + 100"})]),
    ("plain", [INS(values="*", condition="s.op = 'I'"),
               INS(values={"stmt": "s.stmt", "id": "s.id", "dt": "s.dt", "name": "'other'"})]),
    ("plain", [BD()]),
    ("plain", [U(), INS(), BD(condition="t.qty > 3 AND t.flag")]),
    ("plain", [BU(set={"name": "'orphan'", "qty": "t.qty + 1"}, condition="t.amount IS NOT NULL"), U()]),
    ("plain", [U(condition="s.op = 'U'"), D(condition="s.op = 'D'"), BU(set={"flag": "NOT t.flag"})]),
    ("partitioned", [U(), INS()]),
    ("partitioned", [D(condition="s.op = 'D'"), U(condition="s.amount >= t.amount"), INS(), BD(condition="t.id < 5")]),
    ("partitioned", [U(set={"amount": "t.amount * 2"}, condition="t.dt = DATE '2026-11-02'")]),
    ("partitioned", [BU(set={"qty": "0"}, condition="t.dt <> DATE '2026-11-01'")]),
    ("sequenced", [U(), INS()]),
    ("sequenced", [U(set={"name": "s.name"}), INS()]),
    ("sequenced", [D(condition="s.op = 'D'"), U()]),
    ("sequenced", [D()]),
    ("one_bucket", [U(condition="s.qty IN (0, 3, 6, 9)"), D(), INS(condition="s.name IS NOT NULL")]),
    ("one_bucket", [U(set={"qty": "CASE s.op WHEN 'U' THEN 1 WHEN 'D' THEN 2 ELSE 3 END"}), INS()]),
    ("one_bucket", [BD(condition="t.name IS NULL OR t.name IN ('alpha', 'gamma')")]),
]


def batched(statements: list[list], guard_side: str = "s") -> list:
    """The statements as one list of clauses, each clause of statement k guarded by ``stmt = k``."""
    out = []
    for k, clauses in enumerate(statements):
        for c in clauses:
            side = "t" if c.when == "not_matched_by_source" else "s"
            guard = f"{side}.stmt = {k}"
            out.append(type(c)(c.when, c.action, f"{guard} AND ({c.condition})" if c.condition else guard,
                               c.assignments))
    return out


def repeated(rows: list[dict], count: int) -> list[dict]:
    return [dict(r, stmt=k) for k in range(count) for r in rows]


class Harness:
    """Targets in one warehouse; sources written once per statement count."""

    def __init__(self, spark, root):
        self.spark = spark
        self.cat = Catalog(str(root / "wh"))
        self.cat.create_database("db")
        self.root = root
        self.count = 0

    def source(self, count: int, rows=SOURCE_ROWS) -> str:
        self.count += 1
        path = str(self.root / f"source-{self.count}.parquet")
        pq.write_table(pa.Table.from_pylist(repeated(rows, count), schema=SOURCE_SCHEMA), path)
        return path

    def target(self, shape: str, count: int = 1, rows=TARGET_ROWS) -> str:
        self.count += 1
        name = f"db.t{self.count}"
        s = SHAPES[shape]
        t = self.cat.create_table(name, SCHEMA, primary_keys=s["pk"], partition_keys=s["partition"],
                                  options=s["options"])
        rows = repeated(rows, count)
        t.write(pa.Table.from_pylist(rows[: len(rows) // 2], schema=SCHEMA))
        t.write(pa.Table.from_pylist(rows[len(rows) // 2:], schema=SCHEMA))
        return name

    def local(self, name: str, clauses, source: str, ident: int = 1) -> dict:
        d = merge_here_or_refuse(self.cat.get_table(name), source, clauses=[c.to_dict() for c in clauses],
                                 commit_user="test", commit_identifier=ident, engine="local")
        assert d.result is not None
        return d.result

    def on_spark(self, name: str, clauses, source: str) -> dict:
        spec = {"target": name, "warehouse": self.cat.warehouse, "source": source,
                "clauses": [c.to_dict() for c in clauses], "commit_user": "test", "commit_identifier": 1,
                "driver_bytes": 0}
        return merge_into(self.spark, spec).to_dict()

    def read(self, name: str) -> pa.Table:
        t = self.cat.get_table(name)
        return t.read().sort_by([(k, "ascending") for k in t.primary_keys])

    def differences(self, shape: str, statements: list[list]) -> list:
        """Run the statements of one shape on both engines; the statements whose tables differ."""
        source = self.source(len(statements))
        a, b = self.target(shape, len(statements)), self.target(shape, len(statements))
        clauses = batched(statements)
        local, spark = self.local(a, clauses, source), self.on_spark(b, clauses, source)
        assert local["engine"] == "local" and spark["engine"] == "spark", spark
        ours, theirs = self.read(a), self.read(b)
        bad = []
        for k, stmt in enumerate(statements):
            mine = ours.filter(pc.equal(ours.column("stmt"), k))
            other = theirs.filter(pc.equal(theirs.column("stmt"), k))
            if mine != other:
                bad.append((shape, k, [c.describe() for c in stmt], mine.num_rows, other.num_rows))
        if not bad and local["rows"] != spark["rows"]:
            bad.append((shape, "row counts", local["rows"], spark["rows"]))
        self.last = (a, clauses, source)
        return bad


@pytest.fixture(scope="module")
def harness(spark, tmp_path_factory):
    return Harness(spark, tmp_path_factory.mktemp("differential"))


def test_corpus_covers_every_clause_kind():
    kinds = {(c.when, c.action) for _, clauses in CORPUS for c in clauses}
    assert len(CORPUS) >= 40 and len(kinds) == 5
    assert {shape for shape, _ in CORPUS} == set(SHAPES)


def test_every_statement_gives_the_same_table_on_both_engines(harness):
    mismatches = []
    for shape in SHAPES:
        mismatches += harness.differences(shape, [clauses for s, clauses in CORPUS if s == shape])
    assert not mismatches, "\n".join(map(str, mismatches))
    # The same commit again does nothing.
    name, clauses, source = harness.last
    assert harness.local(name, clauses, source)["status"] == "already_committed"


@pytest.mark.interop
def test_pypaimon_reads_the_locally_merged_tables(harness, tmp_path):
    statements = [clauses for s, clauses in CORPUS if s == "partitioned"]
    name = harness.target("partitioned", len(statements))
    harness.local(name, batched(statements), harness.source(len(statements)))
    t = harness.cat.get_table(name)
    theirs = pypaimon_reads(harness.cat.warehouse, name, [{}], tmp_path / "pypaimon")[0]
    ours = t.read()
    assert ours.num_rows == theirs.num_rows
    assert canonical(ours, t.primary_keys) == canonical(theirs.select(ours.column_names), t.primary_keys)


def _snapshot_files(cat: Catalog, name: str) -> list[str]:
    root = cat.get_table(name).path
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("clauses, pattern", [
    ([U(set={"name": "s.nope"})], "nope"),
    ([U(condition="t.missing > 1")], "missing"),
    ([U(set={"amount": "s.name"})], "cannot store a string value into the double target column 'amount'"),
    ([U(condition="s.qty + 1")], r"the condition 's.qty \+ 1' is of type int, not boolean"),
])
def test_bad_clauses_fail_on_both_engines_and_change_nothing(harness, clauses, pattern):
    a, b = harness.target("plain"), harness.target("plain")
    source = harness.source(1)
    before_a, before_b = _snapshot_files(harness.cat, a), _snapshot_files(harness.cat, b)
    with pytest.raises(Exception, match=pattern):
        harness.local(a, clauses, source)
    with pytest.raises(Exception, match=pattern):
        harness.on_spark(b, clauses, source)
    assert _snapshot_files(harness.cat, a) == before_a and _snapshot_files(harness.cat, b) == before_b


def test_a_duplicate_source_key_fails_on_both_engines_and_changes_nothing(harness, tmp_path):
    path = harness.source(1, SOURCE_ROWS + SOURCE_ROWS[:1])
    clauses = [U(condition="s.qty > 0"), INS()]
    a, b = harness.target("plain"), harness.target("plain")
    before = _snapshot_files(harness.cat, a)
    with pytest.raises(PaimonError, match="several rows for one target primary key"):
        harness.local(a, clauses, path)
    with pytest.raises(Exception, match="several rows for one target primary key"):
        harness.on_spark(b, clauses, path)
    assert _snapshot_files(harness.cat, a) == before


_CONDITIONS = st.sampled_from([
    "s.qty > t.qty", "s.amount IS NULL", "t.flag", "s.name IN ('alpha', 'gamma')", "s.op = 'D'",
    "s.price >= t.price", "s.ts < t.ts", "s.updated_at > 120",
    "t.name LIKE '%a%'", "s.flag <=> t.flag",
])
_T_CONDITIONS = st.sampled_from(["t.qty > 2", "t.amount IS NULL", "t.flag", "t.dt = DATE '2026-11-02'"])


@st.composite
def _statements(draw):
    clauses = []
    for _ in range(draw(st.integers(0, 2))):
        cond = draw(_CONDITIONS)
        clauses.append(draw(st.sampled_from([U(condition=cond), D(condition=cond),
                                             U(set={"qty": "t.qty + s.qty"}, condition=cond)])))
    if draw(st.booleans()):
        clauses.append(draw(st.sampled_from([U(), D()])))
    if draw(st.booleans()):
        clauses.append(INS(condition=draw(st.sampled_from(["s.qty > 4", "s.name IS NOT NULL", "s.op <> 'D'"]))))
    if draw(st.booleans()):
        clauses.append(BD(condition=draw(_T_CONDITIONS)))
    return "plain", clauses or [U()]


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(statements=st.lists(_statements(), min_size=2, max_size=6))
def test_generated_statements_give_the_same_table_on_both_engines(harness, statements):
    assert not harness.differences("plain", [clauses for _, clauses in statements])


def test_a_plain_upsert_gives_the_same_table_on_both_engines(harness):
    """The default clauses read nothing of the target on either engine: merge-on-read and the sequence field
    decide (an older source row loses on read)."""
    source = harness.source(1)
    a, b = harness.target("sequenced"), harness.target("sequenced")
    local, spark = harness.local(a, [U(), INS()], source), harness.on_spark(b, [U(), INS()], source)
    assert local["mode"] == "upsert" and local["target_rows_read"] == 0
    assert harness.read(a) == harness.read(b) and local["rows"] == spark["rows"]
