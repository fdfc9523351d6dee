"""The change feed against pypaimon: the `input` changelog pypaimon commits reads here with the rows and kinds
pypaimon's own streaming read gives, and pypaimon's streaming read positioned by a consumer file written here
starts where that file says."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import SnapshotExpiredError

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string()), ("op", pa.string())])
KIND = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}

WRITE = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string()), ("op", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(schema, primary_keys=["p", "id"], partition_keys=["p"],
                 options={"bucket": "2", "changelog-producer": "input", "rowkind.field": "op"}), False)
t = cat.get_table("db.t")
for rows in ARGS["commits"]:
    wb = t.new_batch_write_builder()
    w = wb.new_write(); w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
    c = wb.new_commit(); c.commit(w.prepare_commit()); w.close(); c.close()
print(json.dumps({"ok": True}))
"""

STREAM = """
from pypaimon import CatalogFactory
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
t = cat.get_table("db.t")
latest = t.snapshot_manager().get_latest_snapshot().id
builder = t.new_stream_read_builder().with_include_row_kind(True).with_consumer_id(ARGS["consumer"])
scan = builder.new_streaming_scan()
read = builder.new_read()
out = []
for plan in scan.stream_sync():
    data = read.to_arrow(plan.splits())
    if data is not None:
        out.extend(data.to_pylist())
    if scan.next_snapshot_id > latest:
        break
print(json.dumps(out))
"""

COMMITS = [
    [{"id": i, "p": p, "v": f"{p}{i}", "op": "+I"} for i in range(6) for p in ("a", "b")],
    [{"id": 1, "p": "a", "v": "a1", "op": "-U"}, {"id": 1, "p": "a", "v": "a1-new", "op": "+U"},
     {"id": 9, "p": "b", "v": "b9", "op": "+I"}],
    [{"id": 2, "p": "b", "v": "b2", "op": "-D"}, {"id": 3, "p": "a", "v": "a3-new", "op": "+I"}],
]


def as_rows(rows: list[dict]) -> list[tuple]:
    return sorted((r["kind"], r["id"], r["p"], r["v"]) for r in rows)


def test_input_changelog_and_consumer_position_agree_with_pypaimon(tmp_path):
    wh = str(tmp_path / "wh")
    run_pypaimon(WRITE, {"warehouse": wh, "commits": COMMITS})
    t = Catalog(wh).get_table("db.t")
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND"] * 3
    assert all(s.changelog_manifest_list for s in t.snapshots())   # pypaimon commits the input changelog

    ours = t.changes(1, mode="changelog").read_all().to_pylist()
    assert t.changes(1).read_all().to_pylist() == ours             # auto on a table with a producer: changelog
    for r in ours:
        r["kind"] = KIND[r["_change_type"]]
    written = as_rows([dict(r, kind=r["op"]) for c in COMMITS[1:] for r in c])
    assert set(as_rows(ours)) <= set(written) and {"+U", "-D", "+I"} <= {r["kind"] for r in ours}
    assert {r["_commit_version"] for r in ours} == {2, 3}

    t.consumers.create("reader", 2)     # pypaimon starts at snapshot 2, as the file says
    theirs = run_pypaimon(STREAM, {"warehouse": wh, "consumer": "reader"})
    assert as_rows([dict(r, kind=r["_row_kind"]) for r in theirs]) == as_rows(ours)
    assert t.consumers.get("reader") >= 3   # pypaimon moved the consumer in the same file

    t.consumers.delete("reader")
    t.create_tag("first", 1)
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, now="2100-01-01")
    with pytest.raises(SnapshotExpiredError, match="snapshot 2 .*expired.*mode='diff'"):
        t.changes("first", 3, mode="changelog")
    diff = t.changes("first", 3, mode="diff").read_all().to_pylist()    # the ends are still there
    assert as_rows([dict(r, kind=KIND[r["_change_type"]]) for r in diff]) == sorted([
        ("-U", 1, "a", "a1"), ("+U", 1, "a", "a1-new"), ("+I", 9, "b", "b9"), ("-D", 2, "b", "b2"),
        ("-U", 3, "a", "a3"), ("+U", 3, "a", "a3-new")])
