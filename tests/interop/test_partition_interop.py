"""Partition directories of DATE, TIMESTAMP(p), TIMESTAMP WITH LOCAL TIME ZONE, DECIMAL, BOOLEAN and string
partitions are the ones pypaimon (which follows Paimon's Java naming) creates, with `partition.legacy-name` true
(Paimon's default) and false: each side reads the other's tables, and expiry deletes the files it should."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from tests.format.upkeep_helpers import FUTURE

from .pypaimon_env import run_pypaimon
from .test_format_interop import canonical, pypaimon_reads

pytestmark = pytest.mark.interop

PARTS = ["d", "ts", "ts6", "ltz", "dec", "flag", "s"]
SCHEMA = pa.schema([
    ("d", pa.date32()), ("ts", pa.timestamp("ms")), ("ts6", pa.timestamp("us")),
    ("ltz", pa.timestamp("us", tz="UTC")), ("dec", pa.decimal128(5, 2)), ("flag", pa.bool_()), ("s", pa.string()),
    pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
])
UTC = dt.timezone.utc


def partition_values(i: int) -> dict:
    """Three distinct partitions: round values, values with fractions, and values before the epoch."""
    return [
        {"d": dt.date(2026, 1, 1), "ts": dt.datetime(2026, 1, 1, 2, 30), "ts6": dt.datetime(2026, 1, 1, 2, 30),
         "ltz": dt.datetime(2026, 7, 1, 2, 30, tzinfo=UTC), "dec": decimal.Decimal("1.50"), "flag": True,
         "s": "a/b:c d"},
        {"d": dt.date(2026, 1, 2), "ts": dt.datetime(2026, 1, 2, 0, 0, 1, 500000),
         "ts6": dt.datetime(2026, 1, 2, 0, 0, 1, 123456), "ltz": dt.datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC),
         "dec": decimal.Decimal("-0.05"), "flag": False, "s": "x{y}=z%"},
        {"d": dt.date(1969, 12, 31), "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
         "ts6": dt.datetime(1969, 12, 31, 23, 59, 59), "ltz": dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
         "dec": decimal.Decimal("0.00"), "flag": True, "s": "plain"},
    ][i % 3]


def rows(ids, version: int, nulls: bool = False) -> pa.Table:
    out = []
    for i in ids:
        r = dict(partition_values(i))
        if nulls and i % 4 == 3:
            r.update(d=None, ts=None, s="  ")  # NULL and a blank string: partition.default-name
        r.update(id=i, v=f"v{version}-{i}")
        out.append(r)
    return pa.Table.from_pylist(out, schema=SCHEMA)


WRITE = """
import pyarrow.parquet as pq
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
batches = [pq.read_table(p) for p in ARGS["batches"]]
cat.create_table(ARGS["table"], Schema.from_pyarrow_schema(batches[0].schema, partition_keys=ARGS["parts"],
                 primary_keys=ARGS["pks"], options=ARGS["options"]), False)
t = cat.get_table(ARGS["table"])
for b in batches:
    wb = t.new_batch_write_builder()
    w = wb.new_write(); w.write_arrow(b)
    c = wb.new_commit(); c.commit(w.prepare_commit()); w.close(); c.close()
print(json.dumps({"ok": True}))
"""


def pypaimon_write(wh: str, table: str, batches: list[pa.Table], tmp: Path, options: dict, pks=()) -> None:
    paths = []
    for i, b in enumerate(batches):
        p = tmp / f"{table}-batch-{i}.parquet"
        pq.write_table(b, p)
        paths.append(str(p))
    run_pypaimon(WRITE, {"warehouse": wh, "table": table, "batches": paths, "parts": PARTS, "pks": list(pks),
                         "options": options})


def data_dirs(table_path: str) -> set[str]:
    """Relative partition directories holding data files (as they are on disk)."""
    out = set()
    for root, _, files in os.walk(table_path):
        if any(f.startswith("data-") for f in files):
            out.add(os.path.relpath(root, table_path).rsplit("/", 1)[0])
    return out


def data_files(table_path: str) -> set[str]:
    return {os.path.join(r, f) for r, _, fs in os.walk(table_path) for f in fs if f.startswith("data-")}


@pytest.mark.parametrize("legacy", ["true", "false"])
def test_both_sides_spell_and_read_the_same_partition_directories(tmp_path, legacy):
    wh = str(tmp_path / "wh")
    options = {"partition.legacy-name": legacy}
    batches = [rows(range(0, 8), 1, nulls=True), rows(range(8, 12), 2)]
    pypaimon_write(wh, "db.theirs", batches, tmp_path, options)
    cat = Catalog(wh)
    ours = cat.create_table("db.ours", SCHEMA, partition_keys=PARTS, options=options)
    for b in batches:
        ours.write(b)
    theirs = cat.get_table("db.theirs")

    assert data_dirs(ours.path) == data_dirs(theirs.path)
    assert len(data_dirs(ours.path)) == 5  # three partitions, two of them also with NULL and blank values
    if legacy == "true":
        assert "d=20454/ts=2026-01-01T02%3A30/ts6=2026-01-01T02%3A30/ltz=2026-07-01T02%3A30/dec=1.50/flag=true/" \
               "s=a%2Fb%3Ac d" in data_dirs(ours.path)
    expected = canonical(pa.concat_tables(batches), ["id"])
    assert canonical(theirs.read(), ["id"]) == expected
    for t in ("db.ours", "db.theirs"):
        assert canonical(pypaimon_reads(wh, t, [{}], tmp_path / t)[0].select(SCHEMA.names), ["id"]) == expected


@pytest.mark.parametrize("legacy", ["true", "false"])
def test_upkeep_of_a_pypaimon_table_finds_its_files(tmp_path, legacy):
    """Compaction, then expiry of the old snapshots deletes exactly the replaced files (by Paimon's paths); orphan
    cleanup deletes nothing live; pypaimon reads the result."""
    wh = str(tmp_path / "wh")
    options = {"partition.legacy-name": legacy, "bucket": "1"}
    pypaimon_write(wh, "db.t", [rows(range(0, 9), 1), rows(range(3, 12), 2)], tmp_path, options,
                   pks=PARTS + ["id"])
    t = Catalog(wh).get_table("db.t")
    before = data_files(t.path)
    assert before
    t.maintenance.compact()
    latest = t.latest_snapshot()
    live = {t.data_file_path(t.partition_codec.from_bytes(e.partition), e.bucket, e.file)
            for e in t.file_entries(latest)}
    assert live and not (live & before)

    result = t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)
    assert sorted(result.data_files) == sorted(before)
    assert data_files(t.path) == live

    orphan = f"{sorted(live)[0].rsplit('/', 1)[0]}/data-00000000-dead-beef-0000-000000000000-0.parquet"
    with open(orphan, "wb") as f:
        f.write(b"left behind by a failed writer")
    assert [f.path for f in t.maintenance.remove_orphan_files(older_than=FUTURE).files] == [orphan]
    assert data_files(t.path) == live
    expected = canonical(pa.concat_tables([rows(range(0, 3), 1), rows(range(3, 12), 2)]), ["id"])
    assert canonical(t.read(), ["id"]) == expected
    theirs = pypaimon_reads(wh, "db.t", [{}], tmp_path / "after")[0]
    assert canonical(theirs.select(SCHEMA.names), ["id"]) == expected
