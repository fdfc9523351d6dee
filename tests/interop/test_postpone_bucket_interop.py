"""A postpone-bucket table (`bucket = -2`) pypaimon writes keeps its new files in `bucket-postpone/` until
Paimon's compaction gives them buckets. This library cannot read or write such a table, but its upkeep works on
it: a rollback deletes the rolled-back commit's files at their real paths, and orphan cleanup leaves the live
ones, so pypaimon reads the table as before."""

from __future__ import annotations

import os

import pytest

from airflow_paimon.format import Catalog, UnsupportedTableError

from .pypaimon_env import run_pypaimon
from .test_format_interop import pypaimon_reads

pytestmark = pytest.mark.interop

WRITE = """
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(schema, primary_keys=["k"], options={"bucket": "-2"}), False)
t = cat.get_table("db.t")
for batch in ARGS["batches"]:
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"k": [k for k, _ in batch], "v": [v for _, v in batch]}, schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()
rb = t.new_read_builder()
print(json.dumps(rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows))
"""


def _postponed(table) -> set[str]:
    folder = f"{table.path}/bucket-postpone"
    return set(os.listdir(folder)) if os.path.isdir(folder) else set()


def test_upkeep_of_a_postpone_bucket_table_finds_its_files(tmp_path):
    wh = str(tmp_path / "wh")
    # pypaimon's batch read sees only real buckets: nothing before Paimon's compaction
    assert run_pypaimon(WRITE, {"warehouse": wh, "batches": [[[1, "a"], [2, "b"]], [[2, "b2"], [3, "c"]]]}) == 0
    table = Catalog(wh).get_table("db.t")
    files = {s.id: {e.file.file_name for e in table.file_entries(s)} for s in table.snapshots()}
    assert {e.bucket for e in table.file_entries(table.latest_snapshot())} == {-2}
    assert _postponed(table) == files[2]
    with pytest.raises(UnsupportedTableError, match="postpone-bucket table"):
        table.read()

    assert table.maintenance.remove_orphan_files(older_than="2999-01-01").files_deleted == 0
    assert _postponed(table) == files[2]
    result = table.maintenance.rollback(to_snapshot=1)
    assert [os.path.basename(p) for p in result.data_files] == sorted(files[2] - files[1])
    assert all("/bucket-postpone/" in p for p in result.data_files)
    assert _postponed(table) == files[1]
    assert table.maintenance.remove_orphan_files(older_than="2999-01-01").files_deleted == 0
    assert _postponed(table) == files[1]
    [theirs] = pypaimon_reads(wh, "db.t", [{}], tmp_path / "out")
    assert theirs.num_rows == 0
