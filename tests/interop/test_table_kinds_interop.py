"""Metadata commands work on every kind of Paimon table pypaimon writes: a dynamic-bucket primary-key table
(Paimon's default, with HASH index files; also written here, see test_dynamic_bucket_interop.py), a
deletion-vector table, a bucketed append table and a table with
ARRAY/MAP/ROW columns (which this library also reads and writes). Expiry, tag expiry, orphan cleanup and
rollback keep every file (index files included) that a retained snapshot or tag needs: pypaimon reads the same
rows after each step, and writes on after a rollback. Reads and writes this library does not support are refused
at the read or write, naming the option."""

from __future__ import annotations

import json

import fastavro
import pytest

from airflow_paimon.cli import main
from airflow_paimon.format import Catalog, UnsupportedTableError
from tests.format.upkeep_helpers import FUTURE

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

KINDS = {
    # name: (primary keys, options, the message a write (and, where given, a read) is refused with)
    "dynamic": (["p", "id"], {}, None),  # read and written (test_dynamic_bucket_interop)
    # pypaimon leaves its rows at level 0, which deletion-vector reads skip: both read none (see
    # test_deletion_vectors_interop.py for the table read and written here).
    "dv": (["p", "id"], {"bucket": "2", "deletion-vectors.enabled": "true"}, None),
    "bucketed": ([], {"bucket": "2", "bucket-key": "id"}, None),  # read and written (test_bucketed_append_interop)
    "nested": ([], {}, None),  # read and written (tests/interop/test_nested_types_interop.py)
}
READ_REFUSED: dict[str, str] = {}

_COMMON = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
BASE = [pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
        pa.field("v", pa.int64())]
NESTED = BASE + [pa.field("tags", pa.list_(pa.string())), pa.field("attrs", pa.map_(pa.string(), pa.int64())),
                 pa.field("point", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())]))]

def schema_of(kind):
    return pa.schema(NESTED if kind == "nested" else BASE)

def batch(kind, ids, p, v):
    cols = {"id": pa.array(ids, pa.int64()), "p": [p] * len(ids), "v": pa.array([v] * len(ids), pa.int64())}
    if kind == "nested":
        cols["tags"] = [[f"t{i}", "x"] for i in ids]
        cols["attrs"] = [[("k", i), ("v", v)] for i in ids]
        cols["point"] = [{"x": i, "y": f"y{v}"} for i in ids]
    return pa.table(cols, schema=schema_of(kind))

def write(t, kind, ids, p, v):
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(batch(kind, ids, p, v))
    c.commit(w.prepare_commit())
    w.close(); c.close()

def read(t, options=None):
    t = t.copy(options) if options else t
    rb = t.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted([r["id"], r["p"], r["v"]] for r in data.to_pylist())

def reads(name):
    t = cat.get_table(name)
    out = {"latest": read(t)}
    for tag in t.list_tags():
        out["tag:" + tag] = read(t, {"scan.tag-name": tag})
    return out
"""

WRITE = _COMMON + """
import json
cat.create_database("db", True)
for kind, (pks, options) in ARGS["kinds"].items():
    cat.create_table("db." + kind, Schema.from_pyarrow_schema(schema_of(kind), partition_keys=["p"],
                     primary_keys=pks or None, options=options), False)
    t = cat.get_table("db." + kind)
    write(t, kind, list(range(0, 20)), "a", 1)
    write(t, kind, list(range(10, 30)), "b", 2)
    t.create_tag("t1")
    write(t, kind, list(range(5, 15)), "a", 3)
    t.create_tag("t2", time_retained="1d")
    write(t, kind, list(range(25, 40)), "b", 4)
print(json.dumps({k: reads("db." + k) for k in ARGS["kinds"]}))
"""

READ = _COMMON + """
import json
print(json.dumps(reads(ARGS["table"])))
"""

WRITE_AFTER_ROLLBACK = _COMMON + """
import json
t = cat.get_table(ARGS["table"])
write(t, ARGS["kind"], list(range(0, 50)), "a", 9)
print(json.dumps(reads(ARGS["table"])))
"""


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def index_files_needed(table) -> set[str]:
    """Paths of the index files the index manifests of every snapshot and tag name."""
    out = set()
    roots = table.snapshots() + [t.snapshot for t in table.tags.list()]
    for s in roots:
        if not s.index_manifest:
            continue
        with open(f"{table.path}/manifest/{s.index_manifest}", "rb") as f:
            for r in fastavro.reader(f):
                out.add(r.get("_EXTERNAL_PATH") or f"{table.path}/index/{r['_FILE_NAME']}")
    return out


def assert_index_files_exist(table) -> None:
    import os
    missing = [p for p in index_files_needed(table) if not os.path.exists(p)]
    assert not missing, missing


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    wh = str(tmp_path_factory.mktemp("kinds") / "wh")
    before = run_pypaimon(WRITE, {"warehouse": wh, "kinds": {k: [v[0], v[1]] for k, v in KINDS.items()}})
    return wh, before


@pytest.mark.parametrize("kind", list(KINDS))
def test_metadata_commands_work_on_every_kind_of_table(written, kind, capsys, monkeypatch):
    wh, before = written
    before = before[kind]
    name = f"db.{kind}"
    monkeypatch.setenv("PAIMON_WAREHOUSE", wh)
    table = Catalog(wh).get_table(name)
    if kind == "dynamic":
        assert index_files_needed(table), "pypaimon wrote no HASH index: the test would prove nothing"
    assert_index_files_exist(table)

    code, out, err = cli(capsys, "snapshots", name, "--json")
    assert code == 0, err
    assert [s["snapshot_id"] for s in json.loads(out)][-1] == table.latest_snapshot().id
    code, out, err = cli(capsys, "tags", name, "--json")
    assert code == 0 and sorted(t["tag_name"] for t in json.loads(out)) == ["t1", "t2"], err
    code, out, err = cli(capsys, "files", name, "--json")
    assert code == 0 and json.loads(out), err
    for system in ("snapshots", "tags", "files", "manifests", "schemas"):
        assert getattr(table.inspect, system)().num_rows > 0, system
    assert table.inspect.options().num_rows == len(table.options())
    code, _, err = cli(capsys, "tag", "create", name, "mine", "--snapshot", "2")
    assert code == 0, err
    code, _, err = cli(capsys, "tag", "rename", name, "mine", "yours")
    assert code == 0, err
    code, _, err = cli(capsys, "tag", "delete", name, "yours")
    assert code == 0, err
    code, out, err = cli(capsys, "expire-tags", name, "--json")
    assert code == 0 and json.loads(out)["tags"] == [], err

    # Refused at the read or the write, with the option named; the table unchanged.
    if KINDS[kind][2] is not None:
        with pytest.raises(UnsupportedTableError, match=KINDS[kind][2]):
            table.new_write()
    code, _, err = cli(capsys, "read", name)
    if kind in READ_REFUSED:
        assert code == 1 and READ_REFUSED[kind] in err and len(err.strip().splitlines()) == 1
        with pytest.raises(UnsupportedTableError, match=READ_REFUSED[kind]):
            table.read()
    else:
        assert code == 0, err
        assert sorted([r["id"], r["p"], r["v"]] for r in table.read().to_pylist()) == before["latest"]

    code, out, err = cli(capsys, "expire-snapshots", name, "--retain-min", "1", "--older-than", "2100-01-01",
                         "--json")
    assert code == 0 and json.loads(out)["snapshots"], err
    assert_index_files_exist(table)
    assert run_pypaimon(READ, {"warehouse": wh, "table": name}) == before

    expired = table.maintenance.expire_tags(now=FUTURE)
    assert expired.tags == ["t2"]
    assert_index_files_exist(table)
    code, _, err = cli(capsys, "remove-orphan-files", name, "--older-than", "2100-01-01")
    assert code == 0, err
    assert_index_files_exist(table)
    kept = {k: v for k, v in before.items() if k != "tag:t2"}
    assert run_pypaimon(READ, {"warehouse": wh, "table": name}) == kept

    code, _, err = cli(capsys, "rollback", name, "--tag", "t1")
    assert code == 0, err
    assert_index_files_exist(table)
    after = run_pypaimon(READ, {"warehouse": wh, "table": name})
    assert after == {"latest": before["tag:t1"], "tag:t1": before["tag:t1"]}
    if kind == "dynamic":
        # pypaimon assigns buckets from the HASH index of the rolled-back-to snapshot: it must still be there.
        again = run_pypaimon(WRITE_AFTER_ROLLBACK, {"warehouse": wh, "table": name, "kind": kind})
        expected = sorted([r for r in before["tag:t1"] if r[1] != "a"] + [[i, "a", 9] for i in range(50)])
        assert again["latest"] == expected
