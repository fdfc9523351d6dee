"""MERGE on Spark into dynamic-bucket primary-key tables (`bucket = -1`).

A key must stay in the bucket the HASH index gives it (merge-on-read merges within a bucket only), a new key must
fill buckets as Paimon's assigner fills them, and the commit must carry the HASH index files of the buckets that
grew. Each test checks the data files against the snapshot's index, and the plain upsert against the library's
own `Table.write` of the same rows: same buckets for every key, same index.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog, DuplicateKeyError, UnsupportedTableError
from airflow_paimon.format.bucketing import hash_codes
from airflow_paimon.format.deletion_vectors_index import read_index_manifest
from airflow_paimon.format.hash_index import HASH_INDEX, read_hashes
from airflow_paimon.merge import matched_delete, matched_update, not_matched_by_source_delete, not_matched_insert

from .reference import clause, merge_rows
from .test_merge import (
    COLUMNS,
    SCHEMA,
    both_paths,  # noqa: F401  (the fixture running a test through both merge paths)
    check,
    make_target,
    merge,
    row,
    table_rows,
    write_source,
)

pytestmark = pytest.mark.spark

TARGET = 5
DYNAMIC = {"dynamic-bucket.target-row-num": str(TARGET)}


def key_buckets(table) -> dict[tuple, set[int]]:
    """(partition, id) -> the buckets whose data files (latest snapshot) hold a row of the key."""
    out: dict[tuple, set[int]] = {}
    codec = table.partition_codec
    for e in table.file_entries(table.latest_snapshot()):
        p = codec.from_bytes(e.partition)
        for i in pq.read_table(table.data_file_path(p, e.bucket, e.file)).column("id").to_pylist():
            out.setdefault((p, i), set()).add(e.bucket)
    return out


def index_hashes(table) -> dict[tuple[bytes, int], set[int]]:
    """(partition, bucket) -> the key hashes of the latest snapshot's HASH index file of the bucket."""
    snap = table.latest_snapshot()
    return {(e.partition, e.bucket): set(read_hashes(table, e).tolist())
            for e in read_index_manifest(table, snap.index_manifest) if e.index_type == HASH_INDEX}


def check_index_matches_data(table) -> dict[tuple, set[int]]:
    """Every key is in one bucket, and each bucket's index holds exactly the hashes of the keys its files hold
    (no compaction ran: deleted keys still have their -D rows there)."""
    buckets = key_buckets(table)
    assert all(len(b) == 1 for b in buckets.values()), {k: b for k, b in buckets.items() if len(b) > 1}
    data: dict[tuple[bytes, int], set[int]] = {}
    codec = table.partition_codec
    for (p, i), (b,) in buckets.items():
        h = int(hash_codes(pa.table({"id": pa.array([i], pa.int64())}))[0])
        data.setdefault((codec.to_bytes(p), b), set()).add(h)
    assert index_hashes(table) == data
    assert max(len(h) for h in data.values()) <= TARGET
    return buckets


@pytest.mark.usefixtures("both_paths")
def test_a_spark_upsert_buckets_keys_as_the_library_writes_them(spark, warehouse, tmp_path):
    cat = warehouse
    history = [row(i) for i in range(40)]
    make_target(cat, partitioned=True, bucket=-1, options=DYNAMIC, rows=history)
    make_target(cat, "db.lib", partitioned=True, bucket=-1, options=DYNAMIC, rows=history)
    before = key_buckets(cat.get_table("db.t"))
    source = [row(i, 1) for i in range(25, 70)]           # 15 updates, 30 new keys over three partitions
    r = merge(spark, cat, write_source(tmp_path, source))
    assert r["status"] == "committed" and r["mode"] == "upsert" and r["engine"] == "spark"
    cat.get_table("db.lib").write(pa.Table.from_pylist(source, schema=SCHEMA))
    table, library = cat.get_table("db.t"), cat.get_table("db.lib")
    check(cat, table_rows(cat, "db.lib"))
    assert len(table_rows(cat)) == 70
    buckets = check_index_matches_data(table)
    assert buckets == key_buckets(library)
    assert index_hashes(table) == index_hashes(library)
    assert all(buckets[k] == b for k, b in before.items()), "an updated key left its bucket"
    assert len({b for (b,) in buckets.values()}) > 3, "new keys opened no bucket: the test would prove little"


@pytest.mark.usefixtures("both_paths")
def test_a_conditional_spark_merge_keeps_one_row_per_key_in_its_bucket(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat, partitioned=True, bucket=-1, options=DYNAMIC, rows=[row(i) for i in range(60)])
    table = cat.get_table("db.t")
    before_rows, before = table_rows(cat), key_buckets(table)
    source = [row(i, 1, status="gone" if i % 5 == 0 else None) for i in range(40, 90)]
    clauses = [matched_delete(condition="s.status = 'gone'"),
               matched_update(set={"amount": "t.amount + s.amount", "name": "upper(s.name)"},
                              condition="s.id % 2 = 0"),
               not_matched_insert(condition="s.id < 80"),
               not_matched_by_source_delete(condition="t.id < 3")]
    r = merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    assert r["status"] == "committed" and r["mode"] == "merge"
    ref = [clause("matched", "delete", lambda s, t: s["status"] == "gone"),
           clause("matched", "update", lambda s, t: s["id"] % 2 == 0,
                  {"amount": lambda s, t: t["amount"] + s["amount"], "name": lambda s, t: s["name"].upper()}),
           clause("not_matched", "insert", lambda s, t: s["id"] < 80, "*"),
           clause("not_matched_by_source", "delete", lambda s, t: t["id"] < 3)]
    expected = merge_rows(before_rows, source, ["id", "dt"], ref, COLUMNS)
    check(cat, expected)
    table = cat.get_table("db.t")
    buckets = check_index_matches_data(table)
    assert all(buckets[k] == b for k, b in before.items()), "a merged key left its bucket"
    # Only the keys the merge wrote are in the index: 80..89 were not inserted.
    assert {i for (_, i) in buckets} == set(range(80))
    # Matched keys were joined in their own buckets: each touched bucket read once.
    assert r["target_rows_read"] == len(before_rows)

    # A second merge updates keys the first one inserted: they stay where it put them.
    again = [row(i, 2) for i in range(70, 80)]
    merge(spark, cat, write_source(tmp_path, again, "again.parquet"), ident=2,
          clauses=[matched_update(set="*", condition="s.amount > t.amount")])
    check(cat, [x for x in expected if not 70 <= x["id"] < 80] + again)
    assert check_index_matches_data(cat.get_table("db.t")) == buckets


def test_new_keys_open_buckets_beyond_the_target_row_num(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat, bucket=-1, options=DYNAMIC, rows=[row(i) for i in range(7)])      # buckets 0 (5) and 1 (2)
    source = [row(i, 1) for i in range(5, 31)]                                            # 2 updates, 24 new keys
    r = merge(spark, cat, write_source(tmp_path, source), clauses=[matched_update(), not_matched_insert()])
    assert r["status"] == "committed"
    buckets = check_index_matches_data(cat.get_table("db.t"))
    counts: dict[int, int] = {}
    for (b,) in buckets.values():
        counts[b] = counts.get(b, 0) + 1
    # 31 keys, five a bucket: buckets 0..5 full, bucket 6 holds the last one.
    assert counts == {0: 5, 1: 5, 2: 5, 3: 5, 4: 5, 5: 5, 6: 1}
    assert all(buckets[((), i)] == {0} for i in range(5))
    assert len(table_rows(cat)) == 31


def test_a_spark_merge_of_duplicate_source_keys_writes_no_index(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat, bucket=-1, options=DYNAMIC, rows=[row(i) for i in range(7)])
    table = cat.get_table("db.t")
    snap = table.latest_snapshot().id
    index_dir = sorted(p.name for p in (tmp_path / "wh" / "db.db" / "t" / "index").iterdir())
    source = [row(i, 1) for i in (50, 51, 50)]
    with pytest.raises(DuplicateKeyError, match="^the MERGE source has 1 more row.*first duplicate: id=50"):
        merge(spark, cat, write_source(tmp_path, source), clauses=[matched_update(), not_matched_insert()])
    assert cat.get_table("db.t").latest_snapshot().id == snap
    assert sorted(p.name for p in (tmp_path / "wh" / "db.db" / "t" / "index").iterdir()) == index_dir


def test_a_cross_partition_upsert_table_is_refused_before_spark_starts(tmp_path):
    """Paimon keeps a cross-partition upsert table's keys in a global index (keys to partitions); the library
    refuses to write one, and so does the merge, before anything is written."""
    from airflow_paimon.spark.merge import merge_into
    from airflow_paimon.spark.tables import write_changes

    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())]),
                             primary_keys=["p", "id"], partition_keys=["p"], options={"bucket": "-1"})
    t.write(pa.table({"id": [1], "p": ["a"], "v": [1]}))
    # As Flink creates one: the primary key leaves out the partition key.
    schema_file = tmp_path / "wh" / "db.db" / "t" / "schema" / "schema-0"
    meta = json.loads(schema_file.read_text())
    meta["primaryKeys"] = ["id"]
    schema_file.write_text(json.dumps(meta))
    before = sorted(str(p) for p in (tmp_path / "wh").rglob("*"))

    def no_session():
        raise AssertionError("Spark was started")

    with pytest.raises(UnsupportedTableError, match="cross-partition upsert table"):
        merge_into(no_session, {"target": "db.t", "warehouse": str(tmp_path / "wh"), "source": str(tmp_path)})
    with pytest.raises(UnsupportedTableError, match="cross-partition upsert table"):
        write_changes(None, Catalog(str(tmp_path / "wh")).get_table("db.t"), None)  # type: ignore[arg-type]
    assert sorted(str(p) for p in (tmp_path / "wh").rglob("*")) == before


@pytest.mark.interop
def test_spark_merges_into_a_table_pypaimon_wrote_and_pypaimon_reads_one_row_per_key(spark, tmp_path):
    from tests.interop.pypaimon_env import run_pypaimon
    from tests.interop.test_dynamic_bucket_interop import CREATE_AND_WRITE, OPTIONS, READ_WRITE_READ

    wh = str(tmp_path / "wh")
    first = [(i, "a" if i % 3 else "b", 1) for i in range(12)]
    run_pypaimon(CREATE_AND_WRITE, {"warehouse": wh, "options": OPTIONS, "rows": first})
    cat = Catalog(wh)
    table = cat.get_table("db.t")
    before = {(p, b): h for (p, b), h in index_hashes(table).items()}
    assert len(before) >= 3, "pypaimon filled one bucket: the test would prove little"
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])

    def source(rows, name):
        return write_source(tmp_path, [{"id": i, "p": p, "v": v} for i, p, v in rows], name, schema)

    upsert = [(i, "a" if i % 3 else "b", 2) for i in range(6, 20)]
    r = merge(spark, cat, source(upsert, "s1.parquet"))
    assert r["mode"] == "upsert" and r["engine"] == "spark"
    cond = [(i, "a" if i % 3 else "b", 3) for i in (0, 1, 2, 10, 11, 30, 31, 32)]
    merge(spark, cat, source(cond, "s2.parquet"), ident=2,
          clauses=[matched_delete(condition="s.id = 0"), matched_update(set="*", condition="s.id <> 1"),
                   not_matched_insert(condition="s.id < 32")])
    latest = {(i, p): v for rows in (first, upsert) for i, p, v in rows}
    latest.update({(i, p): v for i, p, v in cond if (i, p) in latest and i not in (0, 1)})
    latest.update({(i, p): v for i, p, v in cond if (i, p) not in latest and i < 32})
    del latest[(0, "b")]
    expected = sorted([i, p, v] for (i, p), v in latest.items())
    table = cat.get_table("db.t")
    assert sorted([r["id"], r["p"], r["v"]] for r in table.read().to_pylist()) == expected
    after = index_hashes(table)
    for key, hashes in before.items():
        assert hashes <= after[key], "a key left the bucket pypaimon's index put it in"
    buckets = key_buckets(table)
    assert all(len(b) == 1 for b in buckets.values())
    # pypaimon reads one row per key, then writes on from our index, and still reads one row per key.
    theirs = [(i, "a" if i % 3 else "b", 4) for i in (2, 30, 31, 40)]
    final = sorted([i, p, v] for (i, p), v in {**{(r[0], r[1]): r[2] for r in expected},
                                                **{(i, p): v for i, p, v in theirs}}.items())
    assert run_pypaimon(READ_WRITE_READ, {"warehouse": wh, "rows": theirs}) == {"before": expected, "after": final}


@pytest.mark.usefixtures("both_paths")
@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"}, {"changelog-producer": "lookup"}],
                         ids=["deletion-vectors", "lookup-changelog"])
def test_a_spark_merge_matches_the_in_process_merge(spark, warehouse, tmp_path, options):
    """The same MERGE on Spark and in process, into two copies of a dynamic-bucket table: same rows, same changes
    (a lookup changelog's before-images come from the buckets the index gives), and on a deletion-vector table one
    live row per key above level 0."""
    from airflow_paimon.local_merge.engine import merge_in_process

    cat = warehouse
    history = [row(i) for i in range(30)]
    opts = {**DYNAMIC, **options}
    make_target(cat, bucket=-1, options=opts, rows=history)
    local = make_target(cat, "db.local", bucket=-1, options=opts, rows=history)
    base = local.latest_snapshot().id
    source = [row(i, 1, status="gone" if i % 7 == 0 else None) for i in range(20, 45)]
    clauses = [matched_delete(condition="s.status = 'gone'"), matched_update(set={"amount": "t.amount + s.amount"}),
               not_matched_insert(condition="s.id < 40")]
    r = merge(spark, cat, write_source(tmp_path, source), clauses=clauses)
    assert r["status"] == "committed" and r["engine"] == "spark"
    merge_in_process(local, pa.Table.from_pylist(source, schema=SCHEMA), [c.to_dict() for c in clauses])
    check(cat, table_rows(cat, "db.local"))
    table = cat.get_table("db.t")
    buckets = key_buckets(table)
    assert {i for (_, i) in buckets} <= set(range(40))

    def feed(t):
        got = t.changes(base, t.latest_snapshot().id).read_all().to_pylist()
        return sorted((c["_change_type"], c["id"], c["amount"]) for c in got)

    assert feed(table) == feed(cat.get_table("db.local"))
    if "deletion-vectors.enabled" in options:
        snap = table.latest_snapshot()
        assert all(e.file.level > 0 for e in table.file_entries(snap))
        live = [i for part in table.read(columns=["id"]).column("id").chunks for i in part.to_pylist()]
        assert len(live) == len(set(live)) == len(table_rows(cat, "db.local"))


def test_write_changes_with_row_kinds_buckets_as_the_library_writes(spark, warehouse):
    """Updates, deletes (of a known and of an unknown key: its hash joins the index, as in Paimon) and inserts
    written by `write_changes` land where the library's own write of the same changes puts them."""
    from airflow_paimon.spark.tables import write_changes

    cat = warehouse
    make_target(cat, bucket=-1, options=DYNAMIC, rows=[row(i) for i in range(8)])
    make_target(cat, "db.lib", bucket=-1, options=DYNAMIC, rows=[row(i) for i in range(8)])
    changes = [(1, "+U"), (3, "-D"), (50, "-D"), (9, "+I"), (10, "+I"), (11, "+I"), (7, "+U")]
    data = pa.Table.from_pylist([row(i, 1) for i, _ in changes], schema=SCHEMA)
    kinds = [k for _, k in changes]
    df = spark.createDataFrame(data.append_column("_VALUE_KIND", pa.array(kinds)).to_pandas())
    res = write_changes(spark, cat.get_table("db.t"), df, num_tasks=3)
    assert res.rows == {"inserted": 3, "updated": 2, "deleted": 2}
    library = cat.get_table("db.lib")
    codes = {"+I": 0, "+U": 2, "-D": 3}
    library.transaction().commit(library.new_write().write(data, pa.array([codes[k] for k in kinds], pa.int8())))
    table = cat.get_table("db.t")
    check(cat, table_rows(cat, "db.lib"))
    assert check_index_matches_data(table) == key_buckets(cat.get_table("db.lib"))
    assert index_hashes(table) == index_hashes(cat.get_table("db.lib"))
    assert ((), 50) in key_buckets(table)
