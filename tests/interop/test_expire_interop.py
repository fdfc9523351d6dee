"""Upkeep of a table pypaimon wrote (with tags pypaimon created): after our compaction, expiry, tag deletion,
tag expiry and rollback, pypaimon still reads every retained snapshot and tag exactly as before, reads the tags we
created, and can go on writing."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_paimon.format import Catalog
from tests.format.upkeep_helpers import FUTURE, all_files, live_data_paths, upsert
from tests.interop.pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

_COMMON = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})

def read(table, options=None):
    t = table.copy(options) if options else table
    rb = t.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted([r["id"], r["p"], r["v"]] for r in data.to_pylist())

def write(table, ids, p, v):
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids),
                            "v": pa.array([v] * len(ids), pa.int64())}, schema=SCHEMA))
    c.commit(w.prepare_commit())
    w.close(); c.close()

def everything(table):
    out = {"snapshots": {}, "tags": {}}
    sm = table.snapshot_manager()
    latest = sm.get_latest_snapshot()
    for sid in range(1, (latest.id if latest else 0) + 1):
        try:
            if sm.get_snapshot_by_id(sid) is None:
                continue
        except Exception:
            continue
        out["snapshots"][str(sid)] = read(table, {"scan.snapshot-id": str(sid)})
    for name in table.list_tags():
        out["tags"][name] = read(table, {"scan.tag-name": name})
    out["latest"] = read(table)
    return out
"""

WRITE = _COMMON + """
import json
catalog.create_database("db", True)
schema = Schema.from_pyarrow_schema(SCHEMA, partition_keys=["p"], primary_keys=["p", "id"],
                                    options={"bucket": "2"})
catalog.create_table("db.t", schema, False)
t = catalog.get_table("db.t")
write(t, list(range(0, 12)), "a", 1)      # 1
write(t, list(range(6, 18)), "b", 2)      # 2
t.create_tag("pp-two", 2)
write(t, list(range(3, 9)), "a", 3)       # 3
write(t, [0, 1], "b", 4)                  # 4
t.create_tag("pp-four", 4, time_retained="1d")
write(t, list(range(10, 14)), "a", 5)     # 5
write(t, [17], "b", 6)                    # 6
print(json.dumps(everything(t)))
"""

READ = _COMMON + """
import json
t = catalog.get_table("db.t")
print(json.dumps(everything(t)))
"""

WRITE_MORE = _COMMON + """
import json
t = catalog.get_table("db.t")
write(t, [100, 101], "a", 7)
print(json.dumps(everything(t)))
"""


def _ours(table) -> dict:
    out = {"snapshots": {}, "tags": {}}
    for sid in table.snapshot_manager.ids():
        out["snapshots"][str(sid)] = sorted([r["id"], r["p"], r["v"]] for r in table.read(snapshot_id=sid).to_pylist())
    for tag in table.tags.list():
        out["tags"][tag.name] = sorted([r["id"], r["p"], r["v"]] for r in table.read(tag=tag.name).to_pylist())
    out["latest"] = sorted([r["id"], r["p"], r["v"]] for r in table.read().to_pylist())
    return out


def test_upkeep_of_a_pypaimon_table_keeps_pypaimon_reading(tmp_path):
    wh = str(tmp_path)
    before = run_pypaimon(WRITE, {"warehouse": wh})
    assert sorted(before["tags"]) == ["pp-four", "pp-two"]
    table = Catalog(wh).get_table("db.t")
    # we read the pypaimon table (snapshots and tags) exactly as pypaimon does
    assert _ours(table) == before

    # compaction makes files unused by the newest snapshots; our tags pin some of them
    assert table.maintenance.compact() is not None                          # 7
    upsert(table, [5, 6], 70, p="a")                           # 8
    table.tags.create("ours-three", snapshot_id=3)
    table.tags.create("ours-latest", time_retained="30 d")
    expected = _ours(table)

    pp_four_only = live_data_paths(table, table.tags.get("pp-four").snapshot) - \
        live_data_paths(table, table.snapshot(3)) - live_data_paths(table, table.latest_snapshot())
    assert pp_four_only
    result = table.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    assert result.snapshots == [1, 2, 3, 4, 5, 6]
    deleted = table.maintenance.delete_tag("pp-two")
    expired = table.maintenance.expire_tags(now=dt.datetime.now() + dt.timedelta(days=2))   # pypaimon's 1 d retention
    assert expired.tags == ["pp-four"]
    freed = set(result.data_files) | set(deleted.data_files) | set(expired.data_files)
    assert freed, "the scenario should free data files"
    assert not (freed & all_files(table.path))
    assert pp_four_only <= set(expired.data_files)
    assert deleted.data_files == []  # snapshot 2's files are all in our tag on snapshot 3

    after = run_pypaimon(READ, {"warehouse": wh})
    assert sorted(after["snapshots"]) == ["7", "8"]
    assert sorted(after["tags"]) == ["ours-latest", "ours-three"]
    for sid, rows in after["snapshots"].items():
        assert rows == expected["snapshots"][sid], f"snapshot {sid}"
    for name, rows in after["tags"].items():
        assert rows == expected["tags"][name], f"tag {name}"
    assert after["tags"]["ours-three"] == before["snapshots"]["3"]
    assert after["latest"] == expected["latest"]

    # rollback to our tag on an expired snapshot: it is written back as snapshot 3, pypaimon reads it and
    # commits on top of it
    rolled = table.maintenance.rollback(to_tag="ours-three")
    assert rolled.restored_snapshot == 3
    more = run_pypaimon(WRITE_MORE, {"warehouse": wh})
    assert sorted(more["snapshots"]) == ["3", "4"]
    assert more["snapshots"]["3"] == before["snapshots"]["3"]
    assert more["latest"] == sorted(before["snapshots"]["3"] + [[100, "a", 7], [101, "a", 7]])
    assert sorted(more["tags"]) == ["ours-three"]
    reopened = Catalog(wh).get_table("db.t")
    assert _ours(reopened)["latest"] == more["latest"]
    orphans = reopened.maintenance.remove_orphan_files(older_than=FUTURE)
    assert run_pypaimon(READ, {"warehouse": wh}) == more
    assert all(p.rsplit("/", 1)[-1].startswith(("data-", "manifest-")) for p in orphans.paths)
