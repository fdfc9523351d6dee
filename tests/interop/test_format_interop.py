"""Tables this library writes read identically in pypaimon, and tables pypaimon writes read identically here."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog, data_file

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

# pypaimon reads every requested (snapshot | tag | latest) of a table and dumps each read as Parquet.
READ_ALL = """
import pyarrow.parquet as pq
from pypaimon import CatalogFactory
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"], **ARGS.get("options", {})})
out = {}
for i, spec in enumerate(ARGS["reads"]):
    t = cat.get_table(ARGS["table"])
    if spec.get("snapshot") is not None:
        t = t.copy({"scan.snapshot-id": str(spec["snapshot"])})
    if spec.get("tag") is not None:
        t = t.copy({"scan.tag-name": spec["tag"]})
    rb = t.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    path = f"{ARGS['out']}/read-{i}.parquet"
    pq.write_table(data, path)
    out[str(i)] = path
print(json.dumps(out))
"""


def pypaimon_reads(warehouse: str, table: str, reads: list[dict], out: Path,
                   options: dict[str, str] | None = None) -> list[pa.Table]:
    out.mkdir(parents=True, exist_ok=True)
    paths = run_pypaimon(READ_ALL, {"warehouse": warehouse, "table": table, "reads": reads, "out": str(out),
                                    "options": options or {}})
    return [pq.read_table(paths[str(i)]) for i in range(len(reads))]


def canonical(t: pa.Table, keys: list[str]) -> list[dict]:
    """Rows as comparable dicts, sorted by key; timestamps with a zone compared as UTC instants."""
    rows = t.to_pylist()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, dt.datetime) and v.tzinfo is not None:
                r[k] = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


ALL_TYPES = pa.schema([
    ("id", pa.int64()), ("dt", pa.string()), ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()),
    ("i32", pa.int32()), ("f32", pa.float32()), ("f64", pa.float64()), ("dec", pa.decimal128(10, 2)),
    ("bigdec", pa.decimal128(30, 5)), ("s", pa.string()), ("bin", pa.binary()), ("d", pa.date32()),
    ("ts", pa.timestamp("us")), ("ts_ltz", pa.timestamp("us", tz="UTC")), ("ts_ms", pa.timestamp("ms")),
])


def make_rows(ids: list[int], version: int) -> pa.Table:
    base = dt.datetime(2026, 11, 20, 1, 2, 3, 456789)
    return pa.table({
        "id": ids,
        "dt": [f"2026-11-{20 + i % 3}" for i in ids],
        "b": [(i + version) % 2 == 0 for i in ids],
        "i8": [(i * 7 + version) % 100 for i in ids],
        "i16": [i * 3 + version for i in ids],
        "i32": [None if i % 11 == 0 else i * 1000 + version for i in ids],
        "f32": [i / 4 for i in ids],
        "f64": [i * 1.5 + version for i in ids],
        "dec": [decimal.Decimal(f"{i}.{version:02d}") for i in ids],
        "bigdec": [decimal.Decimal(f"12345678901234567890.{i:05d}") for i in ids],
        "s": [("a long string value that is not inlined " * (i % 3)) + f"v{version}-{i}" for i in ids],
        "bin": [bytes([i % 256, version % 256]) * (1 + i % 5) for i in ids],
        "d": [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in ids],
        "ts": [base + dt.timedelta(seconds=i, microseconds=version) for i in ids],
        "ts_ltz": [(base + dt.timedelta(minutes=i)).replace(tzinfo=dt.timezone.utc) for i in ids],
        "ts_ms": [base.replace(microsecond=123000) + dt.timedelta(hours=i) for i in ids],
    }, schema=ALL_TYPES)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.objectstore)])
def warehouse(request: pytest.FixtureRequest, tmp_path) -> tuple[str, dict[str, str]]:
    """A warehouse and its catalog options, under Paimon's names (which pypaimon reads too)."""
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        return f"s3://{server.new_bucket()}/wh", server.options()
    return str(tmp_path / "wh"), {}


def test_tables_we_write_read_identically_in_pypaimon(tmp_path, warehouse):
    wh, options = warehouse
    cat = Catalog(wh, options)
    cat.create_database("db")
    pk = cat.create_table("db.pk", ALL_TYPES, primary_keys=["id", "dt"], partition_keys=["dt"],
                          options={"bucket": "3"})
    pk.write(make_rows(list(range(0, 60)), 1))
    pk.write(make_rows(list(range(30, 90)), 2))                       # updates + inserts
    pk.delete(make_rows(list(range(0, 90, 7)), 3).select(["id", "dt"]))
    pk.write(make_rows(list(range(85, 95)), 4))
    app = cat.create_table("db.app", ALL_TYPES, partition_keys=["dt"])
    app.write(make_rows(list(range(0, 40)), 1))
    app.write(make_rows(list(range(20, 50)), 2))

    for name, table in (("db.pk", pk), ("db.app", app)):
        snaps = [s.id for s in table.snapshots()]
        reads = [{}] + [{"snapshot": s} for s in snaps]
        theirs = pypaimon_reads(wh, name, reads, tmp_path / name, options)
        ours = [table.read()] + [table.read(snapshot_id=s) for s in snaps]
        keys = ["id", "dt", "f64"]
        for spec, a, b in zip(reads, ours, theirs):
            assert a.num_rows == b.num_rows, (name, spec)
            assert canonical(a, keys) == canonical(b.select(a.column_names), keys), (name, spec)



def test_files_of_many_row_groups_read_identically_in_pypaimon(tmp_path, monkeypatch):
    """Files cut into 4-row groups, merged here by skipping the groups newer files rewrote, read as pypaimon
    reads them, at every snapshot."""
    monkeypatch.setattr(data_file, "ROW_GROUP_ROWS", 4)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    pk = cat.create_table("db.pk", ALL_TYPES, primary_keys=["id", "dt"], partition_keys=["dt"],
                          options={"bucket": "2"})
    pk.write(make_rows(list(range(0, 60)), 1))
    pk.write(make_rows(list(range(30, 90)), 2))                       # a range rewritten: groups skipped
    pk.delete(make_rows(list(range(0, 20)), 3).select(["id", "dt"]))  # deleted keys: groups skipped
    pk.write(make_rows(list(range(5, 95, 9)), 4))                     # scattered updates
    snaps = [s.id for s in pk.snapshots()]
    reads = [{"snapshot": s} for s in snaps]
    theirs = pypaimon_reads(str(tmp_path / "wh"), "db.pk", reads, tmp_path / "out")
    for sid, b in zip(snaps, theirs):
        a = pk.read(snapshot_id=sid)
        assert canonical(a, ["id", "dt"]) == canonical(b.select(a.column_names), ["id", "dt"]), sid


def test_a_data_file_path_directory_reads_identically_in_pypaimon(tmp_path, warehouse):
    """`data-file.path-directory`: the partition and bucket folders under a folder of the table, on a local disk
    and on an object store; pypaimon finds every file where we put it, at every snapshot, expiry included."""
    wh, options = warehouse
    cat = Catalog(wh, options)
    cat.create_database("db")
    t = cat.create_table("db.t", ALL_TYPES, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "2", "data-file.path-directory": "data"})
    t.write(make_rows(list(range(0, 40)), 1))
    t.write(make_rows(list(range(20, 60)), 2))
    t.maintenance.compact()
    t.write(make_rows(list(range(55, 65)), 3))
    t.maintenance.expire_snapshots(retain_min=2, retain_max=2)
    assert all(p.startswith(f"{t.path}/data/dt=") for p in (t.data_file_path(
        t.partition_codec.from_bytes(e.partition), e.bucket, e.file) for e in t.file_entries(t.latest_snapshot())))
    snaps = [s.id for s in t.snapshots()]
    theirs = pypaimon_reads(wh, "db.t", [{"snapshot": s} for s in snaps], tmp_path / "out", options)
    for s, b in zip(snaps, theirs):
        a = t.read(snapshot_id=s)
        assert canonical(a, ["id", "dt", "f64"]) == canonical(b.select(a.column_names), ["id", "dt", "f64"]), s

def test_files_compressed_by_level_and_zstd_level_read_identically_in_pypaimon(tmp_path, warehouse):
    """`file.compression.per.level` and `file.compression.zstd-level`: files written at level 0 in Snappy (also once
    moved up by metadata), the top level's in gzip, the changelog in zstd at level 9; pypaimon reads every snapshot
    as we do."""
    wh, options = warehouse
    cat = Catalog(wh, options)
    cat.create_database("db")
    t = cat.create_table("db.t", ALL_TYPES, primary_keys=["id", "dt"], partition_keys=["dt"], options={
        "bucket": "2", "changelog-producer": "lookup", "file.compression.per.level": "0:snappy,5:gzip",
        "file.compression.zstd-level": "9"})
    t.write(make_rows(list(range(0, 40)), 1))
    t.write(make_rows(list(range(20, 60)), 2))
    t.maintenance.compact()
    t.write(make_rows(list(range(55, 65)), 3))
    codecs = {pq.read_metadata(pa.BufferReader(t.io.read_bytes(t.data_file_path(
        t.partition_codec.from_bytes(e.partition), e.bucket, e.file)))).row_group(0).column(0).compression
        for s in t.snapshots() for e in t.file_entries(s)}
    assert codecs == {"SNAPPY", "GZIP"}, codecs
    snaps = [s.id for s in t.snapshots()]
    theirs = pypaimon_reads(wh, "db.t", [{"snapshot": s} for s in snaps], tmp_path / "out", options)
    for s, b in zip(snaps, theirs):
        a = t.read(snapshot_id=s)
        assert canonical(a, ["id", "dt", "f64"]) == canonical(b.select(a.column_names), ["id", "dt", "f64"]), s


WRITE_WITH_PYPAIMON = """
import datetime as dt, decimal
import pyarrow as pa, pyarrow.parquet as pq
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
batches = [pq.read_table(p) for p in ARGS["batches"]]
schema = batches[0].schema
cat.create_table("db.pk", Schema.from_pyarrow_schema(schema, partition_keys=["dt"], primary_keys=["id", "dt"],
                 options={"bucket": "3", "rowkind.field": "op"}), False)
cat.create_table("db.app", Schema.from_pyarrow_schema(schema.remove(schema.get_field_index("op")),
                 partition_keys=["dt"]), False)
for name in ("db.pk", "db.app"):
    t = cat.get_table(name)
    for i, b in enumerate(batches):
        if name == "db.app":
            b = b.filter(pa.compute.equal(b.column("op"), "+I")).drop_columns(["op"])
        wb = t.new_batch_write_builder()
        w = wb.new_write(); w.write_arrow(b)
        c = wb.new_commit(); c.commit(w.prepare_commit()); w.close(); c.close()
        if i == 1:
            t.create_tag("after-second")
    t.create_tag("last", time_retained="1d")
print(json.dumps({"ok": True}))
"""


def test_tables_pypaimon_writes_read_identically_here(tmp_path):
    wh = str(tmp_path / "wh")
    batches = []
    specs = [(range(0, 50), 1, "+I"), (range(25, 75), 2, "+I"), (range(0, 75, 6), 3, "-D"), (range(70, 80), 4, "+I")]
    for i, (ids, version, op) in enumerate(specs):
        t = make_rows(list(ids), version)
        t = t.append_column("op", pa.array([op] * t.num_rows))
        path = tmp_path / f"batch-{i}.parquet"
        pq.write_table(t, path)
        batches.append(str(path))
    run_pypaimon(WRITE_WITH_PYPAIMON, {"warehouse": wh, "batches": batches})

    cat = Catalog(wh)
    for name in ("db.pk", "db.app"):
        table = cat.get_table(name)
        snaps = [s.id for s in table.snapshots()]
        tags = table.tags.names()
        assert sorted(tags) == ["after-second", "last"]
        reads = [{}] + [{"snapshot": s} for s in snaps] + [{"tag": t} for t in tags]
        theirs = pypaimon_reads(wh, name, reads, tmp_path / name)
        ours = [table.read()] + [table.read(snapshot_id=s) for s in snaps] + [table.read(tag=t) for t in tags]
        for spec, a, b in zip(reads, ours, theirs):
            assert a.num_rows == b.num_rows, (name, spec)
            assert canonical(a, ["id", "dt", "f64"]) == canonical(b.select(a.column_names), ["id", "dt", "f64"])
        assert table.tags.get("last").time_retained == dt.timedelta(days=1)

    # Our upsert on top of pypaimon's files: same buckets, higher sequence numbers, pypaimon sees the result.
    pk = cat.get_table("db.pk")
    update = make_rows(list(range(40, 60)), 9).append_column("op", pa.array(["+I"] * 20))
    pk.write(update)
    ours = pk.read()
    theirs = pypaimon_reads(wh, "db.pk", [{}], tmp_path / "after-our-write")[0]
    assert canonical(ours, ["id", "dt"]) == canonical(theirs.select(ours.column_names), ["id", "dt"])
    assert {r["id"]: r["i16"] for r in ours.to_pylist()}[45] == 45 * 3 + 9
