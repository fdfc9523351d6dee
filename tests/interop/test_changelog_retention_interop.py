"""pypaimon reads every state of a table whose changelog outlives its snapshots: after our snapshot expiry (which
leaves long-lived changelogs behind) and after our changelog expiry, its batch read of each retained snapshot and
of each tag equals ours, and its ChangelogManager reads the long-lived changelog files we wrote.

pypaimon 2.1.0's streaming scan does not read long-lived changelogs (it starts at a retained snapshot), so a
streaming read from the earliest kept changelog is checked with this library's change feed only."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
KV = pa.schema([("k", pa.int64()), ("v", pa.int64())])

READ = """
from pypaimon import CatalogFactory
t = CatalogFactory.create({"warehouse": ARGS["warehouse"]}).get_table("db.t")

def read(options=None):
    table = t.copy(options) if options else t
    rb = table.new_read_builder()
    return sorted([r["k"], r["v"]] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())

out = {"snapshots": {}, "tags": {}, "latest": read(), "changelogs": {}}
for sid in ARGS["snapshots"]:
    out["snapshots"][str(sid)] = read({"scan.snapshot-id": str(sid)})
for name in t.list_tags():
    out["tags"][name] = read({"scan.tag-name": name})
cm = t.changelog_manager()
out["earliest_changelog"] = cm.earliest_long_lived_changelog_id()
out["latest_changelog"] = cm.latest_long_lived_changelog_id()
for c in cm.safely_get_all_changelogs():
    out["changelogs"][str(c.id)] = c.changelog_manifest_list
print(json.dumps(out))
"""


def _ours(t) -> dict:
    def read(**kw):
        return sorted([r["k"], r["v"]] for r in t.read(**kw).to_pylist())
    return {"snapshots": {str(s): read(snapshot_id=s) for s in t.snapshot_manager.ids()},
            "tags": {x.name: read(tag=x.name) for x in t.tags.list()}, "latest": read()}


def _pypaimon(t, wh) -> dict:
    return run_pypaimon(READ, {"warehouse": wh, "snapshots": t.snapshot_manager.ids()})


def test_pypaimon_reads_every_state_after_changelog_retention(tmp_path):
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    t = catalog.create_table("db.t", KV, primary_keys=["k"], options={
        "bucket": "2", "changelog-producer": "input", "snapshot.num-retained.min": "2",
        "snapshot.num-retained.max": "2", "changelog.num-retained.min": "4", "changelog.num-retained.max": "10",
        "changelog.time-retained": "1 d"})
    for i in range(7):
        t.write(pa.table({"k": pa.array(range(i, i + 4), pa.int64()), "v": pa.array([i] * 4, pa.int64())}))
        if i == 2:
            t.tags.create("three", snapshot_id=3)
    feed_before = t.changes(2, 7, mode="changelog").read_all().to_pylist()

    t.maintenance.expire_snapshots(older_than=FUTURE)         # snapshots 1..5 go; changelogs 1..5 stay (a day)
    assert t.snapshot_manager.ids() == [6, 7]
    got = _pypaimon(t, wh)
    assert {k: got[k] for k in ("snapshots", "tags", "latest")} == _ours(t)
    assert sorted(got["changelogs"], key=int) == ["1", "2", "3", "4", "5"]
    assert all(got["changelogs"].values())
    assert (got["earliest_changelog"], got["latest_changelog"]) == (1, 5)
    assert t.changes(2, 7, mode="changelog").read_all().to_pylist() == feed_before

    t.maintenance.expire_changelogs(now=FUTURE)                # at least 4 counted back from 7 stay: 4..7
    got = _pypaimon(t, wh)
    assert {k: got[k] for k in ("snapshots", "tags", "latest")} == _ours(t)
    assert sorted(got["changelogs"], key=int) == ["4", "5"]
    assert (got["earliest_changelog"], got["latest_changelog"]) == (4, 5)
    assert t.changes(3, 7, mode="changelog").read_all().to_pylist() == \
        [r for r in feed_before if r["_commit_version"] > 3]
