"""Tables merged (on Spark and by the merge driver) and compacted read identically in pypaimon (Apache Paimon's own
Python package)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.merge import matched_delete, matched_update, not_matched_by_source_delete, not_matched_insert
from airflow_paimon.spark.compact_app import run_compaction
from tests.interop.test_format_interop import canonical, pypaimon_reads

from .test_merge import make_target, merge, row, write_source

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def test_merged_and_compacted_tables_read_identically_in_pypaimon(spark, warehouse, tmp_path):
    cat = warehouse
    make_target(cat, partitioned=True, bucket=3, rows=[row(i) for i in range(120)])
    source = [row(i, 1, status="gone" if i % 7 == 0 else "open") for i in range(100, 160)]
    merge(spark, cat, write_source(tmp_path, source), ident=1)                                 # plain upsert
    merge(spark, cat, write_source(tmp_path, [row(i, 2, status="gone" if i % 5 == 0 else "open")
                                              for i in range(0, 40)], "s2.parquet"), ident=2,
          clauses=[matched_delete(condition="s.status = 'gone'"),
                   matched_update(set={"amount": "s.amount + t.amount", "status": "s.status"}),
                   not_matched_insert(), not_matched_by_source_delete(condition="t.amount > 1500")])
    upsert = merge(spark, cat, write_source(tmp_path, [row(i, 3) for i in range(150, 170)], "s3.parquet"), ident=3,
                   driver_bytes=64 << 20)
    assert upsert["engine"] == "driver"                                                        # no Spark job
    cat.get_table("db.t").create_tag("merged")
    run_compaction(spark, {"target": "db.t", "warehouse": cat.warehouse})
    table = cat.get_table("db.t")
    assert table.latest_snapshot().commit_kind == "COMPACT"
    snaps = [s.id for s in table.snapshots()]
    reads = [{}] + [{"snapshot": s} for s in snaps] + [{"tag": "merged"}]
    theirs = pypaimon_reads(cat.warehouse, "db.t", reads, tmp_path / "pypaimon")
    ours = [table.read()] + [table.read(snapshot_id=s) for s in snaps] + [table.read(tag="merged")]
    keys = ["id", "dt"]
    for spec, a, b in zip(reads, ours, theirs):
        assert a.num_rows == b.num_rows, spec
        assert canonical(a, keys) == canonical(b.select(a.column_names), keys), spec
    assert ours[0].num_rows > 0 and isinstance(ours[0], pa.Table)
