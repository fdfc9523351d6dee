from __future__ import annotations

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
