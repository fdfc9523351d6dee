"""`make demo WAREHOUSE=s3://...`: scripts/demo.py against the local S3 server, on a smaller setting (two days of
a 2,000-order table instead of seven of 200,000), with the store's options given as `make demo` passes them
(DEMO_WAREHOUSE, DEMO_OPTIONS) and the keys in the standard AWS variables. Every table lives in the bucket:
the demo's folder holds no warehouse, and the library reads the merged table, its daily tags and the change-feed
tables back from the store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = [pytest.mark.objectstore, pytest.mark.airflow, pytest.mark.subprocess, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_against_an_s3_warehouse(s3_server, tmp_path):
    warehouse = f"s3://{s3_server.new_bucket()}/lake"
    options = {"s3.endpoint": s3_server.endpoint, "s3.path.style.access": "true", "s3.region": REGION}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AIRFLOW", "PYSPARK_", "DEMO_"))}
    env.update(DEMO_DIR=str(tmp_path / "demo"), DEMO_WAREHOUSE=warehouse, DEMO_DAYS="2", DEMO_ROWS="2000",
               DEMO_OPTIONS=" ".join(f"{k}={v}" for k, v in options.items()),
               AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    demo = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py")], env=env, capture_output=True,
                          text=True, timeout=1700, cwd=str(tmp_path))
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    for title in ("Runs of paimon_merge_incremental", "Tags of demo.orders", "Changes of demo.orders_cdc"):
        assert title in demo.stdout
    assert f"Warehouse: {warehouse}" in demo.stdout
    assert not (tmp_path / "demo" / "warehouse").exists()

    catalog = Catalog(warehouse, dict(options, **{"s3.access-key": ACCESS_KEY, "s3.secret-key": SECRET_KEY}))
    orders = catalog.get_table("demo.orders")
    tags = [t.name for t in orders.tags.list()]
    assert len(tags) == 2 and all(f"| {tag} " in demo.stdout for tag in tags)
    # The first load, then each day's inserts and deletes, from the increments the demo wrote.
    expected = set(range(2000))
    for day in sorted((tmp_path / "demo" / "incoming").iterdir()):
        increment = pq.read_table(day / "part-0.parquet", columns=["id", "op"]).to_pylist()
        expected |= {r["id"] for r in increment if r["op"] == "I"}
        expected -= {r["id"] for r in increment if r["op"] == "D"}
    assert sorted(orders.read(columns=["id"]).column("id").to_pylist()) == sorted(expected)
    assert catalog.list_tables("demo") == ["orders", "orders_cdc", "orders_replica"]
    assert catalog.get_table("demo.orders_replica").read(columns=["id"]).num_rows == \
        catalog.get_table("demo.orders_cdc").read(columns=["id"]).num_rows
