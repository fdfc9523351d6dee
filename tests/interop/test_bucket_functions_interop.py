"""`bucket-function.type = mod | hive` put every row where pypaimon-rust (paimon-rust, which implements Paimon's
ModBucketFunction and HiveBucketFunction) puts it: for each type Hive hashes, over random values with NULLs,
negatives, -0.0, NaN and non-ASCII text, and for a bucket key of every type at once. Our upserts into the tables it
wrote land in the buckets of the keys they replace: its read finds each key once, with our value."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.bucketing import bucket_ids

from .pypaimon_env import run_paimon_rust

pytestmark = pytest.mark.interop

SQL = """
from pypaimon_rust.datafusion import SQLContext
ctx = SQLContext()
ctx.register_catalog("paimon", {"warehouse": ARGS["warehouse"]})
ctx.set_current_catalog("paimon")
out = []
for statement in ARGS["statements"]:
    out.append([row for b in ctx.sql(statement) for row in b.to_pylist()])
print(json.dumps(out, default=str))
"""

BUCKETS = 13


def _text(rng: random.Random) -> str:
    return "".join(rng.choice("aZ9 é€😀'-") for _ in range(rng.randrange(0, 40)))


# column -> (SQL type, a random value, its SQL literal)
COLUMNS = {
    "i8": ("TINYINT", lambda r: r.randrange(-128, 128), lambda v: f"CAST({v} AS TINYINT)"),
    "i16": ("SMALLINT", lambda r: r.randrange(-2**15, 2**15), lambda v: f"CAST({v} AS SMALLINT)"),
    "i32": ("INT", lambda r: r.randrange(-2**31, 2**31), str),
    "i64": ("BIGINT", lambda r: r.randrange(-2**63, 2**63), lambda v: f"CAST({v} AS BIGINT)"),
    "b": ("BOOLEAN", lambda r: r.random() < 0.5, lambda v: "true" if v else "false"),
    "f": ("FLOAT", lambda r: r.choice([-0.0, 0.0, math.nan, float(np.float32(r.uniform(-1e6, 1e6)))]),
          lambda v: f"CAST('{'NaN' if math.isnan(v) else repr(v)}' AS FLOAT)"),
    "d": ("DOUBLE", lambda r: r.choice([-0.0, math.nan, r.uniform(-1e12, 1e12), r.random()]),
          lambda v: f"CAST('{'NaN' if math.isnan(v) else repr(v)}' AS DOUBLE)"),
    "s": ("STRING", _text, lambda v: "'" + v.replace("'", "''") + "'"),
    "dec": ("DECIMAL(20,4)", lambda r: decimal.Decimal(r.randrange(-10**19, 10**19)).scaleb(-4).quantize(
        decimal.Decimal("0.0001")) if r.random() < 0.8 else decimal.Decimal(r.randrange(-99, 99)),
        lambda v: f"CAST('{v}' AS DECIMAL(20,4))"),
    "dt": ("DATE", lambda r: dt.date(1900, 1, 1) + dt.timedelta(days=r.randrange(0, 80000)),
           lambda v: f"DATE '{v.isoformat()}'"),
    "bin": ("BYTEA", lambda r: bytes(r.randrange(256) for _ in range(r.randrange(0, 12))),
            lambda v: f"X'{v.hex()}'"),
}


def _literal(column: str, value) -> str:
    return "NULL" if value is None else COLUMNS[column][2](value)


def _rows(rng: random.Random, columns: list[str], n: int) -> list[dict]:
    return [{c: None if rng.random() < 0.08 else COLUMNS[c][1](rng) for c in columns} for _ in range(n)]


def _insert(table: str, columns: list[str], rows: list[dict]) -> str:
    values = ", ".join("(" + ", ".join(_literal(c, r[c]) for c in columns) + ")" for r in rows)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {values}"


def _placement_matches(warehouse: str, name: str, function: str) -> int:
    """Every row of every file of `name` in the bucket our function gives it; returns the rows checked."""
    table = Catalog(warehouse).get_table(name)
    checked = 0
    for entry in table.file_entries(table.latest_snapshot()):
        path = table.data_file_path(table.partition_codec.from_bytes(entry.partition), entry.bucket, entry.file)
        schema = pa.schema([table.arrow_schema().field(k) for k in table.bucket_keys])
        rows = pq.read_table(path, columns=table.bucket_keys).cast(schema)
        ours = bucket_ids(rows, BUCKETS, function)
        assert (ours == entry.bucket).all(), (name, entry.bucket, rows.filter(pa.array(ours != entry.bucket)))
        checked += rows.num_rows
    return checked


def test_hive_buckets_every_type_as_paimon_rust(tmp_path):
    wh = str(tmp_path / "wh")
    rng = random.Random(20261125)
    statements = ["CREATE DATABASE db"]
    for column, (sql_type, _, _) in COLUMNS.items():
        statements.append(f"CREATE TABLE db.{column} ({column} {sql_type}) WITH ('bucket' = '{BUCKETS}', "
                          f"'bucket-function.type' = 'hive', 'bucket-key' = '{column}')")
        statements.append(_insert(f"db.{column}", [column], _rows(rng, [column], 200)))
    every = list(COLUMNS)
    statements.append(f"CREATE TABLE db.every ({', '.join(f'{c} {COLUMNS[c][0]}' for c in every)}) WITH ('bucket' "
                      f"= '{BUCKETS}', 'bucket-function.type' = 'hive', 'bucket-key' = '{','.join(every)}')")
    statements.append(_insert("db.every", every, _rows(rng, every, 300)))
    run_paimon_rust(SQL, {"warehouse": wh, "statements": statements})
    for column in COLUMNS:
        assert _placement_matches(wh, f"db.{column}", "hive") == 200
    assert _placement_matches(wh, "db.every", "hive") == 300


@pytest.mark.parametrize("function, sql_type", [("mod", "INT"), ("mod", "BIGINT"), ("hive", "BIGINT")])
def test_our_upserts_land_in_the_buckets_of_the_keys_paimon_rust_wrote(tmp_path, function, sql_type):
    wh = str(tmp_path / "wh")
    rng = random.Random(7)
    bound = 2**31 if sql_type == "INT" else 2**63
    keys = sorted({rng.randrange(-bound, bound) for _ in range(300)})
    key_literal = (lambda k: str(k)) if sql_type == "INT" else (lambda k: f"CAST({k} AS BIGINT)")
    values = ", ".join(f"({key_literal(k)}, 'x{k}', 'rust')" for k in keys)
    run_paimon_rust(SQL, {"warehouse": wh, "statements": [
        "CREATE DATABASE db",
        f"CREATE TABLE db.t (k {sql_type} NOT NULL, s STRING NOT NULL, v STRING, PRIMARY KEY (k, s)) WITH ("
        f"'bucket' = '{BUCKETS}', 'bucket-function.type' = '{function}', 'bucket-key' = 'k')",
        f"INSERT INTO db.t VALUES {values}"]})
    assert _placement_matches(wh, "db.t", function) == len(keys)
    table = Catalog(wh).get_table("db.t")
    ours = keys[::3] + [bound - 1, -bound]      # replaced keys and two new ones at the ends of the range
    table.write(pa.table({"k": ours, "s": [f"x{k}" for k in ours], "v": ["ours"] * len(ours)},
                         schema=table.arrow_schema()))
    assert _placement_matches(wh, "db.t", function) == len(keys) + len(ours)   # both versions of replaced keys
    [read] = run_paimon_rust(SQL, {"warehouse": wh, "statements": ["SELECT k, v FROM db.t"]})
    got = {}
    for row in read:
        assert row["k"] not in got, f"key {row['k']} in two buckets"
        got[row["k"]] = row["v"]
    mine = set(ours)
    assert got == {k: "ours" if k in mine else "rust" for k in sorted(set(keys) | mine)}
