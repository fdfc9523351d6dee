"""Bucket assignment and BinaryRow bytes against pypaimon, Apache Paimon's own Python package.

Nothing here is hard-coded: every expected hash, bucket and byte string is computed live by pypaimon
in its own environment (see `pypaimon_env.py`) from the same Arrow data, passed as an Arrow IPC file.

Known, deliberate difference (not exercised here): for a null DECIMAL(p > 18) or TIMESTAMP(p > 3)
pypaimon writes a zero slot, while Java's BinaryRowWriter (which this library follows) reserves zeroed
variable-part space and points the slot at it; and pypaimon sizes the bytes of negative wide decimals
whose unscaled value is -2**(8k-1) one byte longer than Java's BigInteger does.
"""

from __future__ import annotations

import decimal
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_paimon.format.binary_row import deserialize_row, serialize_row
from airflow_paimon.format.bucketing import bucket_ids, hash_codes
from tests.interop.pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

D = decimal.Decimal
NUM_ROWS = 2000
BUCKET_COUNTS = [1, 3, 16, 1000]


# --------------------------------------------------------------------------------------------
# Random key columns


def _ints(rng: np.random.Generator, dtype, n: int) -> pa.Array:
    info = np.iinfo(dtype)
    return pa.array(rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype))


def _strings(rng: np.random.Generator, n: int, lengths) -> pa.Array:
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_é✓")
    return pa.array(["".join(rng.choice(alphabet, size=int(k))) for k in rng.choice(lengths, n)])


def _java_safe_unscaled(value: int) -> int:
    """Avoid -2**(8k-1), whose Java byte length pypaimon gets one byte longer (see module docstring)."""
    if value < 0 and (-value) & (-value - 1) == 0 and (-value).bit_length() % 8 == 0:
        return value + 1
    return value


def _decimals(rng: np.random.Generator, n: int, precision: int, scale: int) -> pa.Array:
    py = random.Random(int(rng.integers(0, 2**32)))
    values = []
    for _ in range(n):
        unscaled = py.randrange(10 ** py.randint(1, precision)) * py.choice((1, -1))
        values.append(D(_java_safe_unscaled(unscaled)).scaleb(-scale))
    return pa.array(values, type=pa.decimal128(precision, scale))


def _dates(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.integers(-200_000, 200_000, n).astype(np.int32)).cast(pa.date32())


def _timestamps(rng: np.random.Generator, n: int, unit: str, tz: str | None = None) -> pa.Array:
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000}[unit]
    values = rng.integers(-2_000_000_000, 4_000_000_000, n) * per_second + rng.integers(0, per_second, n)
    return pa.array(values, type=pa.int64()).cast(pa.timestamp(unit, tz=tz))


def _with_nulls(rng: np.random.Generator, arr: pa.Array, rate: float = 0.2) -> pa.Array:
    mask = pa.array(rng.random(len(arr)) < rate)
    return pc.if_else(mask, pa.scalar(None, arr.type), arr)


def _case(name: str, rng: np.random.Generator, n: int) -> pa.Table:
    if name == "int32":
        return pa.table({"k": _ints(rng, np.int32, n)})
    if name == "int64":
        return pa.table({"k": _ints(rng, np.int64, n)})
    if name == "int8+int16+bool":
        return pa.table(
            {"a": _ints(rng, np.int8, n), "b": _ints(rng, np.int16, n), "c": pa.array(rng.random(n) < 0.5)}
        )
    if name == "float32+float64":
        return pa.table(
            {
                "f": pa.array(rng.normal(0, 1e5, n).astype(np.float32)),
                "d": pa.array(rng.normal(0, 1e9, n)),
            }
        )
    if name == "string-short":
        return pa.table({"k": _strings(rng, n, [0, 1, 2, 3, 5, 7])})
    if name == "string-long":
        return pa.table({"k": _strings(rng, n, [8, 9, 15, 16, 17, 31, 64, 200])})
    if name == "string-mixed":
        return pa.table({"k": _strings(rng, n, [0, 3, 7, 8, 12, 40])})
    if name == "binary":
        lengths = rng.choice([0, 4, 7, 8, 13, 50], n)
        return pa.table({"k": pa.array([rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in lengths])})
    if name == "int32+string":
        return pa.table({"id": _ints(rng, np.int32, n), "name": _strings(rng, n, [1, 6, 7, 8, 20])})
    if name == "decimal(10,2)":
        return pa.table({"k": _decimals(rng, n, 10, 2)})
    if name == "decimal(18,0)":
        return pa.table({"k": _decimals(rng, n, 18, 0)})
    if name == "decimal(38,6)":
        return pa.table({"k": _decimals(rng, n, 38, 6)})
    if name == "date":
        return pa.table({"k": _dates(rng, n)})
    if name == "timestamp(ms)":
        return pa.table({"k": _timestamps(rng, n, "ms")})
    if name == "timestamp(us)":
        return pa.table({"k": _timestamps(rng, n, "us")})
    if name == "timestamp_ltz(us)":
        return pa.table({"k": _timestamps(rng, n, "us", tz="UTC")})
    if name == "composite-wide":
        return pa.table(
            {
                "id": _ints(rng, np.int64, n),
                "code": _strings(rng, n, [2, 9, 30]),
                "day": _dates(rng, n),
                "amount": _decimals(rng, n, 30, 4),
                "at": _timestamps(rng, n, "us"),
            }
        )
    if name == "nullable-composite":
        return pa.table(
            {
                "id": _with_nulls(rng, _ints(rng, np.int32, n)),
                "name": _with_nulls(rng, _strings(rng, n, [0, 5, 8, 25])),
                "day": _with_nulls(rng, _dates(rng, n)),
                "price": _with_nulls(rng, _decimals(rng, n, 12, 3)),
                "flag": _with_nulls(rng, pa.array(rng.random(n) < 0.5)),
                "at": _with_nulls(rng, _timestamps(rng, n, "ms")),
            }
        )
    raise AssertionError(name)


CASES = [
    "int32",
    "int64",
    "int8+int16+bool",
    "float32+float64",
    "string-short",
    "string-long",
    "string-mixed",
    "binary",
    "int32+string",
    "decimal(10,2)",
    "decimal(18,0)",
    "decimal(38,6)",
    "date",
    "timestamp(ms)",
    "timestamp(us)",
    "timestamp_ltz(us)",
    "composite-wide",
    "nullable-composite",
]


# --------------------------------------------------------------------------------------------
# pypaimon side

_PYPAIMON_KEYS = """
import pyarrow as pa
from pypaimon import Schema
from pypaimon.schema.data_types import PyarrowFieldParser
from pypaimon.schema.table_schema import TableSchema
from pypaimon.table.row.generic_row import GenericRow, GenericRowSerializer
from pypaimon.table.row.internal_row import RowKind
from pypaimon.write.row_key_extractor import FixedBucketRowKeyExtractor

with pa.memory_map(ARGS["path"]) as source:
    table = pa.ipc.open_file(source).read_all()
fields = PyarrowFieldParser.to_paimon_schema(table.schema)
columns = [column.to_pylist() for column in table.columns]
rows = [
    GenericRowSerializer.to_bytes(GenericRow([c[i] for c in columns], fields, RowKind.INSERT)).hex()
    for i in range(table.num_rows)
]
batch = table.combine_chunks().to_batches()[0]
buckets = {}
for n in ARGS["buckets"]:
    # The key columns are named as the bucket key, as `bucket-key` does for any table.
    options = {"bucket": str(n), "bucket-key": ",".join(table.column_names)}
    schema = TableSchema.from_schema(0, Schema.from_pyarrow_schema(table.schema, options=options))
    _, assigned = FixedBucketRowKeyExtractor(schema).extract_partition_bucket_batch(batch)
    buckets[str(n)] = [int(b) for b in assigned]
print(json.dumps({"rows": rows, "buckets": buckets}))
"""


def _write_ipc(table: pa.Table, path: Path) -> str:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return str(path)


@pytest.mark.parametrize("case", CASES)
def test_buckets_and_row_bytes_match_pypaimon(case, tmp_path):
    rng = np.random.default_rng(CASES.index(case) + 1000)
    table = _case(case, rng, NUM_ROWS)
    keys_file = _write_ipc(table, tmp_path / "keys.arrow")
    answer = run_pypaimon(_PYPAIMON_KEYS, {"path": keys_file, "buckets": BUCKET_COUNTS})

    assert len(answer["rows"]) == NUM_ROWS
    types = [f.type for f in table.schema]
    columns = [c.to_pylist() for c in table.columns]
    for i, expected_hex in enumerate(answer["rows"]):
        values = [c[i] for c in columns]
        ours = serialize_row(values, types)
        assert ours.hex() == expected_hex, f"row {i}: {values}"
        assert deserialize_row(bytes.fromhex(expected_hex), types) == values

    for n in BUCKET_COUNTS:
        ours = bucket_ids(table, n)
        theirs = np.array(answer["buckets"][str(n)], dtype=np.int32)
        mismatched = np.flatnonzero(ours != theirs)
        assert mismatched.size == 0, f"{mismatched.size} rows differ at {n} buckets, first {mismatched[:5]}"
    # distinct keys hash apart: a sanity check that the comparison is not vacuous
    assert len(np.unique(hash_codes(table))) > NUM_ROWS // 2


# --------------------------------------------------------------------------------------------
# A real table written by pypaimon: where rows land, and the BinaryRows in its manifests

_PYPAIMON_TABLE = """
import glob, os
import fastavro
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

with pa.memory_map(ARGS["path"]) as source:
    data = pa.ipc.open_file(source).read_all()
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", False)
schema = Schema.from_pyarrow_schema(
    data.schema,
    partition_keys=ARGS["partition_keys"],
    primary_keys=ARGS["primary_keys"],
    options={"bucket": str(ARGS["buckets"]), "metadata.stats-mode": "full"},
)
catalog.create_table("db.t", schema, False)
table = catalog.get_table("db.t")
builder = table.new_batch_write_builder()
write, commit = builder.new_write(), builder.new_commit()
write.write_arrow(data)
commit.commit(write.prepare_commit())
write.close()
commit.close()

read_builder = table.new_read_builder()
reader = read_builder.new_read()
placed = []
for split in read_builder.new_scan().plan().splits():
    rows = reader.to_arrow([split])
    placed.append({"bucket": split.bucket, "row_ids": rows.column("row_id").to_pylist()})

entries = []
for path in sorted(glob.glob(os.path.join(ARGS["warehouse"], "db.db", "t", "manifest", "manifest-*"))):
    if os.path.basename(path).startswith("manifest-list"):
        continue
    with open(path, "rb") as f:
        for record in fastavro.reader(f):
            meta = record["_FILE"]
            entries.append({
                "partition": record["_PARTITION"].hex(),
                "bucket": record["_BUCKET"],
                "row_count": meta["_ROW_COUNT"],
                "min_key": meta["_MIN_KEY"].hex(),
                "max_key": meta["_MAX_KEY"].hex(),
                "key_min": meta["_KEY_STATS"]["_MIN_VALUES"].hex(),
                "key_max": meta["_KEY_STATS"]["_MAX_VALUES"].hex(),
                "value_min": meta["_VALUE_STATS"]["_MIN_VALUES"].hex(),
                "value_max": meta["_VALUE_STATS"]["_MAX_VALUES"].hex(),
                "value_stats_cols": meta.get("_VALUE_STATS_COLS"),
            })
print(json.dumps({"placed": placed, "entries": entries}))
"""


def _table_data(rng: np.random.Generator, n: int) -> pa.Table:
    ids = rng.permutation(n * 3)[:n].astype(np.int64) - n  # unique, some negative
    codes = _strings(rng, n, [1, 7, 8, 19])
    return pa.table(
        {
            "region": pa.array(rng.choice(["eu", "us-east-1", "apac"], n)),
            "id": pa.array(ids),
            "code": codes,
            "row_id": pa.array(np.arange(n, dtype=np.int64)),
            "day": _dates(rng, n),
            "amount": _decimals(rng, n, 38, 6),
            "price": _decimals(rng, n, 10, 2),
            "at": _timestamps(rng, n, "us"),
            "at_ms": _timestamps(rng, n, "ms"),
            "flag": pa.array(rng.random(n) < 0.5),
            "score": _with_nulls(rng, pa.array(rng.normal(0, 100, n)), 0.1),
            "small": _ints(rng, np.int16, n),
            "payload": pa.array([rng.integers(0, 256, int(k), dtype=np.uint8).tobytes()
                                 for k in rng.choice([3, 30], n)]),
        }
    )


def _key_sort(key: tuple) -> tuple:
    """Paimon's key order: numbers numerically, strings by their UTF-8 bytes."""
    return tuple(v.encode() if isinstance(v, str) else v for v in key)


def test_table_written_by_pypaimon(tmp_path):
    rng = np.random.default_rng(7)
    n, num_buckets = 3000, 5
    data = _table_data(rng, n)
    partition_keys, primary_keys = ["region"], ["region", "id", "code"]
    answer = run_pypaimon(
        _PYPAIMON_TABLE,
        {
            "path": _write_ipc(data, tmp_path / "data.arrow"),
            "warehouse": str(tmp_path / "warehouse"),
            "partition_keys": partition_keys,
            "primary_keys": primary_keys,
            "buckets": num_buckets,
        },
    )

    # 1. Every row sits in the bucket we compute from the primary key minus the partition key.
    bucket_key = data.select(["id", "code"])
    ours = bucket_ids(bucket_key, num_buckets)
    theirs = np.full(n, -1, dtype=np.int32)
    for split in answer["placed"]:
        theirs[split["row_ids"]] = split["bucket"]
    assert (theirs >= 0).all()
    assert (ours == theirs).all(), f"{int((ours != theirs).sum())} of {n} rows in another bucket"

    # 2. The manifests' BinaryRows read back to what the files hold, and we write the same bytes.
    schema_types = [f.type for f in data.schema]
    key_types = [data.schema.field("id").type, data.schema.field("code").type]
    partition_type = [data.schema.field("region").type]
    regions = data.column("region").to_pylist()
    keys = list(zip(data.column("id").to_pylist(), data.column("code").to_pylist()))
    assert sum(e["row_count"] for e in answer["entries"]) == n
    for entry in answer["entries"]:
        partition = deserialize_row(bytes.fromhex(entry["partition"]), partition_type)
        assert serialize_row(partition, partition_type).hex() == entry["partition"]
        rows = [
            i for i in range(n) if regions[i] == partition[0] and ours[i] == entry["bucket"]
        ]
        assert len(rows) == entry["row_count"]

        group_keys = sorted((keys[i] for i in rows), key=_key_sort)
        for field, expected in (("min_key", group_keys[0]), ("max_key", group_keys[-1])):
            assert deserialize_row(bytes.fromhex(entry[field]), key_types) == list(expected)
            assert serialize_row(list(expected), key_types).hex() == entry[field]

        group = data.take(rows)
        for field, which in (("key_min", "min"), ("key_max", "max")):
            expected = [pc.min_max(group.column(c))[which].as_py() for c in ("id", "code")]
            assert deserialize_row(bytes.fromhex(entry[field]), key_types) == expected

        assert entry["value_stats_cols"] is None  # statistics of every column
        for field, which in (("value_min", "min"), ("value_max", "max")):
            expected = [pc.min_max(group.column(i))[which].as_py() for i in range(group.num_columns)]
            assert deserialize_row(bytes.fromhex(entry[field]), schema_types) == expected
            assert serialize_row(expected, schema_types).hex() == entry[field]
