"""pypaimon reads append tables with deletion vectors that this library's deletes, updates and MERGEs wrote.

pypaimon (2.x) applies the deletion vectors of append tables on read: its splits carry each data file's
DeletionFile from the index manifest. So after our deletes and updates it sees exactly the live rows this library
reads, and after our compaction (vectors folded in, index entries dropped) the same rows again.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.local_merge.engine import merge_in_process
from airflow_paimon.merge import matched_update, not_matched_insert

from .pypaimon_env import run_pypaimon

pytestmark = pytest.mark.interop

READ = """
from pypaimon import CatalogFactory
t = CatalogFactory.create({"warehouse": ARGS["warehouse"]}).get_table("db.t")
rb = t.new_read_builder()
splits = rb.new_scan().plan().splits()
rows = sorted([r["id"], r["p"], r["v"]] for r in rb.new_read().to_arrow(splits).to_pylist()) if splits else []
print(json.dumps({"rows": rows,
                  "vectors": sum(1 for s in splits for d in (s.data_deletion_files or []) if d is not None)}))
"""

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def rows(ids, p, v):
    ids = list(ids)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "p": [p] * len(ids), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA
    )


def ours(table) -> list[list]:
    return sorted([r["id"], r["p"], r["v"]] for r in table.read().to_pylist())


@pytest.mark.parametrize("options", [{}, {"bucket": "2", "bucket-key": "id"}], ids=["unaware", "bucketed"])
def test_pypaimon_reads_our_deleted_and_updated_append_rows(tmp_path, options):
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, partition_keys=["p"], options={"deletion-vectors.enabled": "true", **options})
    t.write(pa.concat_tables([rows(range(0, 20), "x", "a"), rows(range(100, 110), "y", "a")]))
    t.write(rows(range(20, 30), "x", "b"))
    t.delete(pa.table({"id": pa.array([0, 5, 25, 101], pa.int64())}))
    t.delete(pa.table({"id": pa.array([6], pa.int64())}))
    t.update(rows([7, 102], "y", "new"), on=["id"])
    merge_in_process(t, pa.concat_tables([rows([8], "x", "m"), rows([200], "y", "m")]),
                     [matched_update(set={"v": "s.v"}), not_matched_insert()], on=["id"])
    expected = ours(t)
    assert len(expected) == 40 - 5 + 1 and [8, "x", "m8"] in expected and [200, "y", "m200"] in expected
    got = run_pypaimon(READ, {"warehouse": wh})
    assert got["vectors"] > 0
    assert got["rows"] == expected

    t.maintenance.compact()
    assert ours(t) == expected
    got = run_pypaimon(READ, {"warehouse": wh})
    assert got["vectors"] == 0
    assert got["rows"] == expected
