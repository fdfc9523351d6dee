"""Writes, reads, time travel and commits of the format library, checked against plain Python models."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import random
import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_paimon.format import Catalog, CommitConflictError, CommitMessage, Split, TableNotFoundError
from tests.sizes import scaled

from .conftest import ORDERS, orders


def rows_by_id(table: pa.Table) -> dict:
    return {r["id"]: r for r in table.to_pylist()}


def test_primary_key_upsert_delete_and_time_travel(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "4"})
    s1 = t.write(orders(range(10)))
    s2 = t.write(orders(range(5, 15), version=1))
    s3 = t.delete(pa.table({"id": pa.array([0, 7], pa.int64())}))
    latest = rows_by_id(t.read())
    assert sorted(latest) == [i for i in range(15) if i not in (0, 7)]
    assert latest[6]["name"] == "n6-v1" and latest[3]["name"] == "n3-v0"
    assert t.read(snapshot_id=s1.id).num_rows == 10
    assert rows_by_id(t.read(snapshot_id=s2.id))[7]["name"] == "n7-v1"
    assert t.read(as_of=s2.time_millis).num_rows == 15
    assert [s.id for s in t.snapshots()] == [1, 2, 3]
    assert t.latest_snapshot().id == s3.id
    assert t.options()["bucket"] == "4"
    assert t.schema().primary_keys == ("id",)


def test_later_rows_of_one_batch_win(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "2"})
    batch = pa.concat_tables([orders([1, 2], version=1), orders([1], version=2)])
    t.write(batch)
    assert rows_by_id(t.read())[1]["name"] == "n1-v2"
    assert t.read().num_rows == 2


def test_partitioned_projection_filter_and_pruning(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                             options={"bucket": "2"})
    t.write(pa.concat_tables([orders(range(10), "2026-11-19"), orders(range(10), "2026-11-20")]))
    only = t.read(filter=pc.field("dt") == "2026-11-20", columns=["id", "amount"])
    assert only.column_names == ["id", "amount"] and only.num_rows == 10
    assert len(t.plan(filter=pc.field("dt") == "2026-11-20")) < len(t.plan())
    some = t.read(filter=(pc.field("amount") > 50) & (pc.field("dt") == "2026-11-19"))
    assert sorted(some.column("id").to_pylist()) == [6, 7, 8, 9]


def test_filter_on_values_applies_after_merge(catalog):
    """An old version matching the filter must not resurface when the newest version does not match."""
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "1"})
    t.write(orders([1]))                 # amount 10
    t.write(orders([1], version=5))      # amount 15
    assert t.read(filter=pc.field("amount") == 10.0).num_rows == 0
    assert t.read(filter=pc.field("amount") == 15.0).num_rows == 1


def test_append_table(catalog):
    t = catalog.create_table("db.events", ORDERS, partition_keys=["dt"])
    t.write(orders(range(5), "a"))
    t.write(orders(range(5), "b"))
    t.write(orders(range(3), "a"))
    assert t.read().num_rows == 13
    assert t.read(filter=pc.field("dt") == "a").num_rows == 8
    assert t.read(snapshot_id=1).num_rows == 5
    assert t.read(filter=pc.field("id") > 100).num_rows == 0


def test_commit_is_exactly_once_per_user_and_identifier(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "2"})
    a = t.write(orders(range(5)), commit_user="airflow:dag.task", commit_identifier=42)
    files_before = sorted(f.path for f in catalog.io.walk(catalog.warehouse))
    b = t.write(orders(range(5), version=9), commit_user="airflow:dag.task", commit_identifier=42)
    assert a.id == b.id == 1
    assert sorted(f.path for f in catalog.io.walk(catalog.warehouse)) == files_before
    assert rows_by_id(t.read())[1]["name"] == "n1-v0"
    c = t.write(orders(range(5), version=9), commit_user="airflow:dag.task", commit_identifier=43)
    assert c.id == 2 and c.commit_identifier == 43 and c.commit_user == "airflow:dag.task"


def test_sequence_numbers_continue_per_bucket(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "2"})
    t.write(orders(range(100)))
    before = t.next_sequence_numbers()
    t.write(orders(range(50), version=1))
    entries = t.file_entries(t.latest_snapshot())
    newest = {}
    for e in entries:
        if e.file.min_sequence_number >= before[((), e.bucket)]:
            newest[e.bucket] = e.file.min_sequence_number
    assert newest == {b: before[((), b)] for b in newest} and len(newest) == 2


def test_lost_race_replans_or_reports_conflict(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "4"})
    t.write(orders(range(100)))
    base = t.latest_snapshot()
    w = t.new_write()
    mine = w.write(orders([1]), base_snapshot=base)
    # Another writer commits to a different bucket: ours still lands, on top of it.
    other_bucket = [m for m in w.write(orders(range(100)), base_snapshot=base) if m.bucket != mine[0].bucket]
    t.commit(other_bucket[:1])
    snap = t.commit(mine, base_snapshot_id=base.id)
    assert snap.id == base.id + 2
    # Another writer commits to the same bucket: refused, nothing committed.
    base = t.latest_snapshot()
    mine = w.write(orders([1], version=7), base_snapshot=base)
    t.commit(w.write(orders([1], version=8), base_snapshot=base))
    mine_paths = [f"{t.bucket_dir((), m.bucket)}/{f.file_name}" for m in mine for f in m.new_files]
    assert all(t.io.exists(p) for p in mine_paths)
    with pytest.raises(CommitConflictError, match="bucket.*the 1 data file.s. it wrote were deleted"):
        t.commit(mine, base_snapshot_id=base.id)
    assert t.latest_snapshot().id == base.id + 1
    assert rows_by_id(t.read())[1]["name"] == "n1-v8"
    assert not any(t.io.exists(p) for p in mine_paths)   # a lost race leaves no orphans behind


def _data_files_on_disk(table) -> set[str]:
    return {f.path.rsplit("/", 1)[1] for f in table.io.walk(table.path) if "/bucket-" in f.path}


def _data_files_referenced(table) -> set[str]:
    names = set()
    for sid in table.snapshot_manager.ids():
        names |= {e.file.file_name for e in table.file_entries(table.snapshot(sid))}
    return names


@pytest.mark.parametrize("pk", [True, False])
def test_racing_writers_all_land_and_leave_no_unreferenced_files(catalog, pk):
    """Real writers (threads, each with its own table handle and commit user) race for the same buckets; every
    write lands, and every data file on disk is one a snapshot references."""
    name = "db.race_pk" if pk else "db.race_append"
    options = {"bucket": "1"} if pk else {}
    catalog.create_table(name, ORDERS, primary_keys=["id"] if pk else [], options=options)
    writers, commits = 4, 8
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def run(w: int) -> None:
        table = catalog.get_table(name)
        barrier.wait()
        try:
            for i in range(commits):
                table.write(orders([w * 100 + i, 1000 + i], version=w))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    t = catalog.get_table(name)
    assert t.latest_snapshot().id == writers * commits
    assert _data_files_on_disk(t) == _data_files_referenced(t)
    data = t.read()
    assert set(data["id"].to_pylist()) >= {w * 100 + i for w in range(writers) for i in range(commits)}
    assert data.num_rows == (writers * commits + commits if pk else 2 * writers * commits)


def _write_in_child(args):
    warehouse, rows, partition, bucket, seq = args
    from airflow_paimon.format import Catalog as C
    t = C(warehouse).get_table("db.orders")
    return t.new_write().write_bucket(partition, bucket, pa.Table.from_pylist(rows, ORDERS), None, seq).to_dict()


@pytest.mark.subprocess
def test_distributed_write_and_serialisable_splits(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "2"})
    from airflow_paimon.format.bucketing import bucket_ids
    data = orders(range(40))
    buckets = bucket_ids(data.select(["id"]), 2)
    jobs = []
    for b in (0, 1):
        part = data.filter(pa.array(buckets == b)).sort_by("id")
        jobs.append((catalog.warehouse, part.to_pylist(), (), b, 0))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        dicts = pool.map(_write_in_child, jobs)
    messages = [CommitMessage.from_dict(json.loads(json.dumps(d))) for d in dicts]
    t.commit(messages, commit_user="driver", commit_identifier=1)
    assert sorted(t.read().column("id").to_pylist()) == list(range(40))
    splits = [Split.from_dict(json.loads(json.dumps(s.to_dict())), t) for s in t.plan()]
    assert sorted(pa.concat_tables([t.read_split(s) for s in splits]).column("id").to_pylist()) == list(range(40))


def test_sequence_field_orders_versions(catalog):
    schema = pa.schema([("id", pa.int64()), ("updated_at", pa.int64()), ("v", pa.string())])
    t = catalog.create_table("db.seq", schema, primary_keys=["id"],
                             options={"bucket": "1", "sequence.field": "updated_at"})
    t.write(pa.table({"id": [1, 2], "updated_at": [10, 10], "v": ["new", "new"]}, schema=schema))
    t.write(pa.table({"id": [1, 2], "updated_at": [5, 20], "v": ["old", "newer"]}, schema=schema))
    assert rows_by_id(t.read()) == {1: {"id": 1, "updated_at": 10, "v": "new"},
                                    2: {"id": 2, "updated_at": 20, "v": "newer"}}


@pytest.mark.parametrize("key_type", [pa.int64(), pa.string()])
def test_random_commits_match_a_model(catalog, key_type):
    schema = pa.schema([("k", key_type), ("p", pa.int32()), ("v", pa.int64())])
    t = catalog.create_table("db.model", schema, primary_keys=["k", "p"], partition_keys=["p"],
                             options={"bucket": "3"})
    rng = random.Random(7)
    model: dict = {}
    history = []
    conv = (lambda i: i) if key_type == pa.int64() else (lambda i: f"key-{i:04d}")
    for step in range(scaled(25)):
        keys = rng.sample(range(200), rng.randint(1, 60))
        rows = [(conv(k), k % 3, rng.randint(0, 10**6)) for k in keys]
        if rng.random() < 0.3:
            t.delete(pa.table({"k": [r[0] for r in rows], "p": [r[1] for r in rows]},
                              schema=pa.schema([("k", key_type), ("p", pa.int32())])))
            for r in rows:
                model.pop((r[0], r[1]), None)
        else:
            t.write(pa.table({"k": [r[0] for r in rows], "p": [r[1] for r in rows], "v": [r[2] for r in rows]},
                             schema=schema))
            for r in rows:
                model[(r[0], r[1])] = r[2]
        history.append((t.latest_snapshot().id, dict(model)))
    for snapshot_id, expected in history:
        got = {(r["k"], r["p"]): r["v"] for r in t.read(snapshot_id=snapshot_id).to_pylist()}
        assert got == expected


def test_reopen_and_errors(catalog):
    with pytest.raises(TableNotFoundError):
        catalog.get_table("db.missing")
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "2"})
    t.write(orders(range(3)))
    again = Catalog(catalog.warehouse).get_table("db.orders")
    assert again.read().num_rows == 3
    assert catalog.list_tables("db") == ["orders"]


def test_a_commit_stays_known_through_its_tag_after_its_snapshot_expired(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id"], options={"bucket": "1"})
    first = t.write(orders(range(3)), commit_user="airflow:merge", commit_identifier=11)
    t.create_tag("day-1", snapshot_id=first.id)
    for i in range(3):
        t.write(orders([i], version=i + 1))
    tomorrow = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, older_than=tomorrow)
    assert not t.snapshot_manager.exists(first.id)
    again = t.write(orders(range(3), version=99), commit_user="airflow:merge", commit_identifier=11)
    assert again.id == first.id
    assert all(r["name"] != "n0-v99" for r in t.read().to_pylist())


def test_a_write_reads_each_manifest_of_its_base_once(catalog, monkeypatch):
    """A lookup write needs its base's files for the sequence numbers and for the lookups: one read of each
    manifest serves both (on an object store each read is a request)."""
    t = catalog.create_table("db.t", ORDERS, primary_keys=["id"],
                             options={"bucket": "2", "changelog-producer": "lookup"})
    for v in range(3):
        t.write(orders(range(v * 4, v * 4 + 6), version=v))
    t = catalog.get_table("db.t")   # nothing read yet
    reads: list[str] = []
    read_entries = t.manifest_io.read_entries
    monkeypatch.setattr(t.manifest_io, "read_entries", lambda name: reads.append(name) or read_entries(name))
    t.write(orders(range(2, 9), version=9))
    assert reads and len(reads) == len(set(reads)), reads


def test_the_files_of_a_snapshot_id_reused_after_a_rollback_are_the_new_ones(catalog):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["id"], options={"bucket": "1"})
    t.write(orders(range(3)))
    second = t.write(orders(range(3, 6)))
    assert second is not None
    before = {e.file.file_name for e in t.file_entries(second)}
    t.maintenance.rollback(to_snapshot=1)
    again = t.write(orders(range(6, 9)))
    assert again is not None and again.id == second.id
    after = {e.file.file_name for e in t.file_entries(again)}
    assert after != before and len(after) == 2
    entries = t.file_entries(again)
    entries.clear()   # a caller's list is its own
    assert {e.file.file_name for e in t.file_entries(again)} == after
    assert sorted(t.read().column("id").to_pylist()) == [0, 1, 2, 6, 7, 8]
