from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    cat = Catalog(str(tmp_path / "warehouse"))
    cat.create_database("db")
    return cat


ORDERS = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("name", pa.string()), ("amount", pa.float64())])


def orders(ids, dt="2026-11-20", version=0) -> pa.Table:
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "dt": [dt] * len(ids),
        "name": [f"n{i}-v{version}" for i in ids],
        "amount": [float(i * 10 + version) for i in ids],
    }, schema=ORDERS)


def tree_digest(path: str | Path) -> dict[str, str]:
    """Every file under `path` with the hash of its bytes: proof that an operation changed nothing."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out
