from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from tests.cloud_servers import azure_server, azure_warehouse  # noqa: F401  (fixtures)
from tests.s3_server import s3_server, s3_warehouse  # noqa: F401  (fixtures)

# Modules whose tests run again with the warehouse on the local S3 server and on Azurite (marker objectstore,
# left out of `make test-fast`): their tests take the `warehouse` fixture, directly or through `catalog`.
ON_OBJECT_STORE = {"test_table", "test_conditional_writes", "test_rollback"}
# Modules where only representative tests run a second time on the S3 server (each costs seconds there): tags,
# expiry, orphan cleanup and the change feed, whose deletes and listings differ most between a disk and a store;
# the merge-on-read that reads a file twice through one open handle (keys, then the groups it keeps).
ON_OBJECT_STORE_TESTS = {
    "test_tags": {"test_create_from_latest_writes_the_snapshot_json", "test_delete_removes_files_only_that_tag_used"},
    "test_expire": {"test_expiry_deletes_only_files_nothing_retained_uses"},
    "test_orphans": {"test_removes_old_unreferenced_files_only", "test_young_files_are_kept_by_default"},
    "test_changes": {"test_diff_between_tags_after_the_snapshots_between_expired"},
    "test_merge_read": {"test_row_groups_a_newer_file_rewrote_entirely_are_never_decoded"},
}
# Random histories of many commits: two minutes each on the S3 server, where the concurrency test covers commits.
LOCAL_ONLY = {"test_random_commits_match_a_model"}


def _on_object_store(metafunc: pytest.Metafunc) -> bool:
    module, name = metafunc.module.__name__.rsplit(".", 1)[-1], metafunc.function.__name__
    if module in ON_OBJECT_STORE:
        return name not in LOCAL_ONLY
    return name in ON_OBJECT_STORE_TESTS.get(module, ())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "warehouse" in metafunc.fixturenames and _on_object_store(metafunc):
        metafunc.parametrize("warehouse", ["local", *(pytest.param(store, marks=pytest.mark.objectstore)
                                                      for store in OBJECT_STORES)], indirect=True)


# The object stores a warehouse is parametrised over, and the fixture that makes a fresh warehouse on each. (GCS is
# not among them: no emulator here accepts the metadata writes obstore sends, see tests/cloud_servers.py.)
OBJECT_STORES = {"s3": "s3_warehouse", "azure": "azure_warehouse"}


@pytest.fixture
def warehouse(request: pytest.FixtureRequest, tmp_path) -> str:
    """The warehouse root: a local folder, or (parametrised) a fresh bucket on the local S3 server or a fresh
    container on Azurite."""
    store = getattr(request, "param", "local")
    if store in OBJECT_STORES:
        return str(request.getfixturevalue(OBJECT_STORES[store]))
    return str(tmp_path / "warehouse")


@pytest.fixture
def catalog(warehouse: str) -> Catalog:
    cat = Catalog(warehouse)
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
