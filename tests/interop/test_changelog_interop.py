"""pypaimon's streaming read with row kinds reads the changelog this library writes (`input`, `lookup`): the same
rows with the same kinds, snapshot by snapshot; and its batch read of a lookup table whose files were moved above
level 0 returns the rows this library reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from tests.format.changelog_helpers import changelog_rows

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

KV = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])

STREAM = """
from pypaimon import CatalogFactory
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for name in ARGS["tables"]:
    t = cat.get_table(name)
    builder = t.new_stream_read_builder().with_include_row_kind(True)
    scan = builder.new_streaming_scan()
    read = builder.new_read()
    latest = t.snapshot_manager().get_latest_snapshot().id
    scan.next_snapshot_id = 1      # stream every snapshot's changelog from the first one on
    per_snapshot = {}
    for plan in scan.stream_sync():
        rows = read.to_arrow(plan.splits()).to_pylist()
        per_snapshot[str(plan.snapshot_id)] = sorted([r["_row_kind"], r["k"], r["p"], r["v"]] for r in rows)
        if scan.next_snapshot_id > latest:
            break
    rb = t.new_read_builder()
    batch = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    out[name] = {"stream": per_snapshot, "batch": sorted([r["k"], r["p"], r["v"]] for r in batch)}
print(json.dumps(out))
"""


def kv(rows):
    cols = list(zip(*rows))
    return pa.table({"k": pa.array(cols[0], pa.int64()), "p": pa.array(cols[1], pa.string()),
                     "v": pa.array(cols[2], pa.int64())}, schema=KV)


def test_pypaimon_streams_our_input_and_lookup_changelog(tmp_path):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    tables = {}
    # lookup_dv: with deletion vectors, each write's COMPACT snapshot also moves its rows up and marks the vectors
    for name in ("input", "lookup", "lookup_dv"):
        t = catalog.create_table(f"db.{name}", KV, primary_keys=["k", "p"], partition_keys=["p"],
                                 options={"changelog-producer": name.split("_")[0], "bucket": "2",
                                          "deletion-vectors.enabled": str(name.endswith("_dv")).lower()})
        t.write(kv([(k, p, k) for k in range(6) for p in "xy"]))
        t.write(kv([(1, "x", 1), (1, "x", 11), (2, "y", 2), (3, "x", 0), (9, "y", 0), (7, "x", 7)]),
                kinds=pa.array([1, 2, 2, 3, 3, 0], pa.int8()))
        t.write(kv([(1, "x", 12), (4, "y", 40), (3, "x", 33)]))   # the deleted 3/x comes back
        tables[f"db.{name}"] = t
    got = run_pypaimon(STREAM, {"warehouse": str(tmp_path / "wh"), "tables": list(tables)})
    for name, t in tables.items():
        ours = {str(s.id): sorted(list(r) for r in changelog_rows(t, s))
                for s in t.snapshots() if s.changelog_manifest_list}
        assert got[name]["stream"] == ours, name
        assert {k for rows in ours.values() for k, *_ in rows} == {"+I", "-U", "+U", "-D"}, name
        assert got[name]["batch"] == sorted([r["k"], r["p"], r["v"]] for r in t.read().to_pylist()), name
    # lookup: the deleted key 3 shows its value before, and is inserted again; deleting the absent key 9 shows
    # nothing
    for name in ("db.lookup", "db.lookup_dv"):
        lookup_rows = [r for rows in got[name]["stream"].values() for r in rows]
        assert ["-D", 3, "x", 3] in lookup_rows and not any(r[1] == 9 for r in lookup_rows), name
        assert [r for r in lookup_rows if r[1:3] == [3, "x"]] == [["+I", 3, "x", 3], ["-D", 3, "x", 3],
                                                                  ["+I", 3, "x", 33]], name


PYPAIMON_WRITES_INPUT = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
cat.create_table("db.theirs", Schema.from_pyarrow_schema(schema, partition_keys=["p"], primary_keys=["k", "p"],
                 options={"bucket": "2", "changelog-producer": "input"}), False)
t = cat.get_table("db.theirs")
for rows in ARGS["batches"]:
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"k": [r[0] for r in rows], "p": [r[1] for r in rows], "v": [r[2] for r in rows]},
                           schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()
print(json.dumps("ok"))
"""


def test_pypaimon_input_changelog_reads_here_and_ours_streams_there(tmp_path):
    wh = str(tmp_path / "wh")
    run_pypaimon(PYPAIMON_WRITES_INPUT, {"warehouse": wh, "batches": [[[1, "x", 1], [2, "y", 2]], [[1, "x", 5]]]})
    t = Catalog(wh).get_table("db.theirs")
    theirs = {str(s.id): sorted(list(r) for r in changelog_rows(t, s)) for s in t.snapshots()}
    assert theirs == {"1": [["+I", 1, "x", 1], ["+I", 2, "y", 2]], "2": [["+I", 1, "x", 5]]}
    t.write(kv([(2, "y", 20)]), kinds=pa.array([2], pa.int8()))
    got = run_pypaimon(STREAM, {"warehouse": wh, "tables": ["db.theirs"]})["db.theirs"]
    assert got["stream"] == {**theirs, "3": [["+U", 2, "y", 20]]}
    assert got["batch"] == [[1, "x", 5], [2, "y", 20]]
