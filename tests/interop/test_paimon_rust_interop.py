"""pypaimon-rust (paimon-rust's bindings: a second implementation beside pypaimon) checks what pypaimon cannot.

* Its incremental scan between any two snapshots, in `changelog` and in `delta` mode, with row kinds, reads the
  changelog of every producer this library writes (`input`, `lookup`, also `write-only`, `full-compaction`, and
  `input` and `lookup` with deletion vectors) and
  the new files of its APPEND snapshots exactly as `Table.changes` reads them, range by range: the same rows with
  the same kinds.
  Its batch read at every snapshot (a merge of our files by its own code, `sequence.field` included) gives the
  rows we read there, also on the other kinds of table written here: deletion vectors on a primary-key and on an
  append table, dynamic buckets, an append table bucketed by a key.
* We read the tables it writes through DataFusion SQL (`CREATE TABLE`, `INSERT`): every snapshot's rows, and the
  change feed in `delta` and `changelog` mode (its `input` changelog) as its own incremental scan gives them.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.changes import ChangeModeError
from airflow_paimon.format.errors import UnsupportedTableError
from tests.format.upkeep_helpers import tree_digest

from .pypaimon_env import run_paimon_rust

pytestmark = pytest.mark.interop

KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}

SCAN = """
from pypaimon_rust.datafusion import PaimonCatalog
t = PaimonCatalog({"warehouse": ARGS["warehouse"]}).get_table(ARGS["table"])
columns = ARGS["columns"]
def rows(builder, plan, kinds):
    out = []
    for batch in builder.new_read().read(plan.splits()):
        for r in batch.to_pylist():
            out.append(([r["rowkind"]] if kinds else []) + [r[c] for c in columns])
    return sorted(out, key=repr)
ranges = []
for mode, start, end in ARGS["ranges"]:
    builder = t.new_read_builder().with_include_row_kind(True)
    ranges.append(rows(builder, builder.new_incremental_scan(start, end, mode).plan(), True))
reads = []
for snapshot in ARGS["snapshots"]:
    builder = t.new_read_builder({"scan.snapshot-id": str(snapshot)})
    reads.append(rows(builder, builder.new_scan().plan(), False))
kinds = {str(s.id()): s.commit_kind() for s in t.list_snapshots()}
print(json.dumps({"ranges": ranges, "reads": reads, "kinds": kinds}))
"""

SQL = """
from pypaimon_rust.datafusion import SQLContext
ctx = SQLContext()
ctx.register_catalog("paimon", {"warehouse": ARGS["warehouse"]})
ctx.set_current_catalog("paimon")
for statement in ARGS["statements"]:
    ctx.sql(statement)
print(json.dumps("ok"))
"""


def _written_in_sql(tmp_path, *statements: str) -> str:
    """A warehouse in which pypaimon-rust created the database `db`, then ran `statements`."""
    warehouse = str(tmp_path / "wh")
    run_paimon_rust(SQL, {"warehouse": warehouse, "statements": ["CREATE DATABASE db", *statements]})
    return warehouse


def _ours(table, ranges: list[tuple[str, int, int]], columns: list[str]) -> list[list[list]]:
    out = []
    for mode, start, end in ranges:
        rows = table.changes(start, end, mode=mode).read_all().to_pylist()
        out.append(sorted(([KINDS[r["_change_type"]]] + [r[c] for c in columns] for r in rows), key=repr))
    return out


def _reads(table, snapshots: list[int], columns: list[str]) -> list[list[list]]:
    return [sorted(([r[c] for c in columns] for r in table.read(snapshot_id=s).to_pylist()), key=repr)
            for s in snapshots]


def _ranges(latest: int, modes: list[str]) -> list[tuple[str, int, int]]:
    """Each snapshot alone, the whole history and all of it after the first snapshot, in every mode."""
    spans = [(i - 1, i) for i in range(1, latest + 1)] + [(0, latest), (1, latest)]
    return [(mode, a, b) for mode in modes for a, b in spans]


def _compare(warehouse: str, name: str, table, columns: list[str], modes: list[str]) -> dict:
    latest = table.latest_snapshot().id
    ranges = _ranges(latest, modes)
    snapshots = list(range(1, latest + 1))
    theirs = run_paimon_rust(SCAN, {"warehouse": warehouse, "table": name, "columns": columns,
                                    "ranges": ranges, "snapshots": snapshots})
    for (mode, a, b), mine, other in zip(ranges, _ours(table, ranges, columns), theirs["ranges"]):
        assert mine == other, f"{mode} ({a}, {b}]: ours {mine}, pypaimon-rust {other}"
    for snapshot, mine, other in zip(snapshots, _reads(table, snapshots, columns), theirs["reads"]):
        assert mine == other, f"snapshot {snapshot}: ours {mine}, pypaimon-rust {other}"
    return theirs


SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])


def _rows(*rows: tuple) -> pa.Table:
    return pa.table(list(zip(*rows)), schema=SCHEMA)


PRODUCER_CASES = [pytest.param(producer, sequence,
                               id=f"{producer.replace(' ', '-')}-{'sequence-field' if sequence else 'plain'}")
                  for producer in ["input", "lookup", "full-compaction", "lookup write-only"]
                  for sequence in (False, True)]
# deletion vectors (each write's COMPACT snapshot moves its rows up, marks the vectors and carries the changelog;
# Paimon refuses them with full-compaction)
PRODUCER_CASES += [pytest.param(producer, sequence,
                                id=f"{producer.replace(' ', '-')}-{'sequence-field' if sequence else 'plain'}")
                   for producer in ["input deletion-vectors", "lookup deletion-vectors"] for sequence in (False, True)]


@pytest.mark.parametrize("producer,sequence", PRODUCER_CASES)
def test_paimon_rust_reads_our_changelog_and_delta_range_by_range(tmp_path, producer, sequence):
    warehouse = str(tmp_path / "wh")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    # write-only: the writes leave their files at level 0, the compaction writes the lookup changelog
    options = {"bucket": "2", "changelog-producer": producer.split()[0],
               "write-only": "true" if "write-only" in producer else "false",
               "deletion-vectors.enabled": "true" if "deletion-vectors" in producer else "false"}
    if sequence:
        options["sequence.field"] = "ts"
    table = catalog.create_table("db.t", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"], options=options)
    table.write(_rows((1, "a", 10, 1), (2, "a", 20, 1), (3, "a", 30, 1), (4, "a", 40, 1), (1, "b", 11, 1),
                      (2, "b", 21, 1)))
    # a changed key, a key written again with its values, a new key, one key twice in one write
    table.write(_rows((1, "a", 12, 2), (2, "a", 20, 1), (5, "b", 51, 2), (3, "a", 31, 2), (3, "a", 32, 3)))
    # a present key and an absent one; with a sequence field the delete, whose `ts` is NULL (the lowest), loses
    table.delete(pa.table({"k": [4, 9], "p": ["a", "b"]}))
    table.maintenance.compact()
    # with a sequence field, the older version of 1/a arrives last and loses; the deleted 4/a comes back
    table.write(_rows((1, "a", 13, 1 if sequence else 4), (6, "a", 60, 4), (2, "b", 22, 4), (4, "a", 41, 4)))
    table = catalog.get_table("db.t")
    theirs = _compare(warehouse, "db.t", table, list(SCHEMA.names), ["changelog", "delta"])
    assert "COMPACT" in theirs["kinds"].values()
    expected = [[1, "a", 12 if sequence else 13], [2, "a", 20], [3, "a", 32], [4, "a", 41], [6, "a", 60],
                [1, "b", 11], [2, "b", 22], [5, "b", 51]]
    assert [[r["k"], r["p"], r["v"]] for r in table.read().sort_by([("p", "ascending"), ("k", "ascending")])
            .to_pylist()] == expected


KV = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
KINDS_OF_TABLE = {
    "deletion-vectors": dict(primary_keys=["k", "p"], options={"bucket": "2", "deletion-vectors.enabled": "true"}),
    "dynamic-bucket": dict(primary_keys=["k", "p"], options={"bucket": "-1", "dynamic-bucket.target-row-num": "2"}),
    "append-deletion-vectors": dict(options={"deletion-vectors.enabled": "true"}),
    "append-bucket-key": dict(options={"bucket": "2", "bucket-key": "k"}),
}


@pytest.mark.parametrize("kind", list(KINDS_OF_TABLE))
def test_paimon_rust_reads_every_snapshot_of_each_kind_of_table(tmp_path, kind):
    warehouse = str(tmp_path / "wh")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    table = catalog.create_table("db.t", KV, partition_keys=["p"], **KINDS_OF_TABLE[kind])

    def rows(*values: tuple) -> pa.Table:
        return pa.table(list(zip(*values)), schema=KV)

    table.write(rows((1, "a", 1), (2, "a", 2), (3, "b", 3), (4, "b", 4), (5, "a", 5)))
    if table.is_primary_key:
        table.maintenance.compact()
        table.write(rows((1, "a", 10), (6, "b", 6)))
        table.delete(pa.table({"k": [2], "p": ["a"]}))
        table.maintenance.compact()
        table.write(rows((3, "b", 30)))
    else:
        table.write(rows((7, "a", 7), (1, "b", 8)))
        table.maintenance.compact()     # each bucket's two small files made one
        if kind == "append-deletion-vectors":
            table.delete(rows((1, "a", 1)))
    table = catalog.get_table("db.t")
    assert len(table.snapshots()) >= 3
    _compare(warehouse, "db.t", table, list(KV.names), [])


def test_we_read_what_paimon_rust_writes_in_sql(tmp_path):
    warehouse = _written_in_sql(
        tmp_path,
        "CREATE TABLE db.t (k BIGINT NOT NULL, p STRING NOT NULL, v BIGINT, s STRING, PRIMARY KEY (k, p)) "
        "PARTITIONED BY (p) WITH ('bucket' = '2', 'changelog-producer' = 'input')",
        "CREATE TABLE db.log (k BIGINT, p STRING, v BIGINT, s STRING) PARTITIONED BY (p)",
        "INSERT INTO db.t VALUES (1, 'a', 10, 'x'), (2, 'a', 20, NULL), (3, 'b', 30, 'z'), (4, 'b', 40, 'w')",
        # an update, a key twice in one statement (the later wins), a new key
        "INSERT INTO db.t VALUES (1, 'a', 11, 'x1'), (3, 'b', 31, NULL), (3, 'b', 32, 'z2'), (5, 'a', 50, 'n')",
        "INSERT INTO db.t VALUES (2, 'a', 21, 'y'), (6, 'b', 60, 'm')",
        "INSERT INTO db.log VALUES (1, 'a', 1, 'x'), (1, 'a', 1, 'x'), (2, 'b', NULL, NULL)",
        "INSERT INTO db.log VALUES (3, 'a', 3, 'y')",
    )
    catalog = Catalog(warehouse)
    table = catalog.get_table("db.t")
    columns = ["k", "p", "v", "s"]
    _compare(warehouse, "db.t", table, columns, ["changelog", "delta"])
    assert sorted(table.read().to_pylist(), key=lambda r: (r["p"], r["k"])) == [
        {"k": 1, "p": "a", "v": 11, "s": "x1"}, {"k": 2, "p": "a", "v": 21, "s": "y"},
        {"k": 5, "p": "a", "v": 50, "s": "n"}, {"k": 3, "p": "b", "v": 32, "s": "z2"},
        {"k": 4, "p": "b", "v": 40, "s": "w"}, {"k": 6, "p": "b", "v": 60, "s": "m"}]
    # the diff between the ends: pre- and post-images of the changed keys, from files written elsewhere
    diff = _ours(table, [("diff", 1, 3)], columns)[0]
    assert diff == sorted([["-U", 1, "a", 10, "x"], ["+U", 1, "a", 11, "x1"], ["-U", 2, "a", 20, None],
                           ["+U", 2, "a", 21, "y"], ["-U", 3, "b", 30, "z"], ["+U", 3, "b", 32, "z2"],
                           ["+I", 5, "a", 50, "n"], ["+I", 6, "b", 60, "m"]], key=repr)
    log = catalog.get_table("db.log")
    _compare(warehouse, "db.log", log, columns, ["delta"])
    assert log.read().num_rows == 4


def test_paimon_rust_reads_changelog_files_named_and_compressed_by_the_table_options(tmp_path):
    warehouse = str(tmp_path / "wh")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    table = catalog.create_table("db.t", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"], options={
        "bucket": "2", "changelog-producer": "lookup", "data-file.prefix": "d-", "changelog-file.prefix": "cl-",
        "changelog-file.compression": "snappy"})
    table.write(_rows((1, "a", 10, 1), (2, "a", 20, 1), (1, "b", 11, 1)))
    table.write(_rows((1, "a", 12, 2), (3, "b", 30, 2)))
    _compare(warehouse, "db.t", catalog.get_table("db.t"), list(SCHEMA.names), ["changelog", "delta"])


def test_files_in_another_format_are_refused_by_name_and_change_nothing(tmp_path):
    """Paimon writes each file in the format its name ends with: a changelog in Avro (`changelog-file.format`),
    and the data files written before a table's `file.format` changed to Parquet. Reading them here is refused
    with an error naming the file's format and the mode that can answer; what is Parquet still reads."""
    warehouse = _written_in_sql(
        tmp_path,
        "CREATE TABLE db.cl (k BIGINT NOT NULL, v STRING, PRIMARY KEY (k)) "
        "WITH ('bucket' = '1', 'changelog-producer' = 'input', 'changelog-file.format' = 'avro')",
        "INSERT INTO db.cl VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO db.cl VALUES (1, 'a1')",
        "CREATE TABLE db.moved (k BIGINT NOT NULL, v STRING, PRIMARY KEY (k)) "
        "WITH ('bucket' = '1', 'file.format' = 'avro')",
        "INSERT INTO db.moved VALUES (1, 'a'), (2, 'b')",
        "ALTER TABLE db.moved SET TBLPROPERTIES ('file.format' = 'parquet')",
        "INSERT INTO db.moved VALUES (2, 'b2'), (3, 'c')",
    )
    catalog = Catalog(warehouse)
    before = tree_digest(warehouse)
    changelog = catalog.get_table("db.cl")
    for mode in ("changelog", "auto"):
        with pytest.raises(ChangeModeError, match=r"changelog-.*\.avro, written in the 'avro' format.*mode='delta'"):
            changelog.changes(0, 2, mode=mode)
    assert _ours(changelog, [("delta", 0, 2)], ["k", "v"])[0] == sorted([["+I", 1, "a"], ["+I", 2, "b"],
                                                                      ["+I", 1, "a1"]], key=repr)
    moved = catalog.get_table("db.moved")
    with pytest.raises(UnsupportedTableError, match=r"data-.*\.avro is written in the 'avro' format"):
        moved.read()
    with pytest.raises(ChangeModeError, match="'avro' format"):
        moved.changes(0, 2, mode="delta")
    assert _ours(moved, [("delta", 1, 2)], ["k", "v"])[0] == [["+I", 2, "b2"], ["+I", 3, "c"]]
    assert tree_digest(warehouse) == before
    theirs = run_paimon_rust(SCAN, {"warehouse": warehouse, "table": "db.moved", "columns": ["k", "v"],
                                    "ranges": [["delta", 1, 2]], "snapshots": []})
    assert theirs["ranges"] == [[["+I", 2, "b2"], ["+I", 3, "c"]]]


def test_a_row_tracking_table_paimon_rust_writes_reads_here_and_refuses_our_writes(tmp_path):
    """Paimon numbers the rows of each new file of a row-tracking table at commit (`firstRowId`, the snapshot's
    `nextRowId`); files written here would carry no row ids, so writes and compactions are refused, unchanged."""
    warehouse = _written_in_sql(
        tmp_path,
        "CREATE TABLE db.t (k BIGINT, v STRING) WITH ('row-tracking.enabled' = 'true')",
        "INSERT INTO db.t VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO db.t VALUES (3, 'c')",
    )
    table = Catalog(warehouse).get_table("db.t")
    assert table.latest_snapshot().next_row_id == 3
    _compare(warehouse, "db.t", table, ["k", "v"], ["delta"])
    before = tree_digest(warehouse)
    with pytest.raises(UnsupportedTableError, match=r"row-tracking table \(row-tracking.enabled = true\)"):
        table.write(pa.table({"k": [4], "v": ["d"]}))
    with pytest.raises(UnsupportedTableError, match="row-tracking"):
        table.maintenance.compact()
    assert tree_digest(warehouse) == before


def test_a_table_paimon_rust_buckets_by_mod_reads_here_and_takes_our_writes(tmp_path):
    """`bucket-function.type = mod` puts key k in bucket k mod N, not where Paimon's default hash would: our
    writes put it there too (test_bucket_functions_interop.py checks both functions on many more keys)."""
    warehouse = _written_in_sql(
        tmp_path,
        "CREATE TABLE db.t (k BIGINT NOT NULL, v STRING, PRIMARY KEY (k)) "
        "WITH ('bucket' = '4', 'bucket-function.type' = 'mod')",
        "INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (5, 'c'), (6, 'd')",
    )
    table = Catalog(warehouse).get_table("db.t")
    assert sorted((e.bucket, e.file.row_count) for e in table.file_entries(table.latest_snapshot())) == [(1, 2), (2, 2)]
    _compare(warehouse, "db.t", table, ["k", "v"], ["delta"])
    theirs = {e.file.file_name for e in table.file_entries(table.latest_snapshot())}
    table.write(pa.table({"k": [1, 7], "v": ["a2", "e"]}, schema=table.arrow_schema()))
    ours = [e for e in table.file_entries(table.latest_snapshot()) if e.file.file_name not in theirs]
    assert sorted((e.bucket, e.file.row_count) for e in ours) == [(1, 1), (3, 1)]
    _compare(warehouse, "db.t", table, ["k", "v"], ["delta"])


def test_data_file_path_directory_both_ways(tmp_path):
    """`data-file.path-directory` puts the partition and bucket folders under a folder of the table: pypaimon-rust
    reads what we write there, we read what it writes there, and the files are where both put them."""
    warehouse = _written_in_sql(
        tmp_path,
        "CREATE TABLE db.theirs (k BIGINT NOT NULL, p STRING NOT NULL, v BIGINT, s STRING, PRIMARY KEY (k, p)) "
        "PARTITIONED BY (p) WITH ('bucket' = '2', 'data-file.path-directory' = 'data')",
        "INSERT INTO db.theirs VALUES (1, 'a', 10, 'x'), (2, 'b', 20, 'y')",
        "INSERT INTO db.theirs VALUES (1, 'a', 11, 'x1'), (3, 'a', 30, NULL)",
    )
    catalog = Catalog(warehouse)
    theirs = catalog.get_table("db.theirs")
    columns = ["k", "p", "v", "s"]
    _compare(warehouse, "db.theirs", theirs, columns, ["delta"])
    theirs.write(pa.table({"k": [2, 4], "p": ["b", "b"], "v": [21, 40], "s": ["y1", "w"]}))
    _compare(warehouse, "db.theirs", catalog.get_table("db.theirs"), columns, ["delta"])
    ours = catalog.create_table("db.ours", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"], options={
        "bucket": "2", "data-file.path-directory": "data", "changelog-producer": "input"})
    ours.write(_rows((1, "a", 10, 1), (2, "b", 20, 1)))
    ours.write(_rows((1, "a", 11, 2), (3, "a", 30, 2)))
    _compare(warehouse, "db.ours", catalog.get_table("db.ours"), list(SCHEMA.names), ["changelog", "delta"])
    for table in ("theirs", "ours"):
        root = f"{warehouse}/db.db/{table}"
        placed = {os.path.relpath(d, root).split(os.sep)[0] for d, _, names in os.walk(root)
                  if any(n.endswith(".parquet") for n in names)}
        assert placed == {"data"}, (table, placed)
