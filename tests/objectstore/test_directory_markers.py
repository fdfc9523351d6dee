"""Object stores have no folders: writing and deleting a table's files must not leave "directory marker" objects
(empty keys ending in ``/``) behind. pyarrow's S3 filesystem writes one per folder level when asked to create a
folder, and one for the parent of every file it deletes once that parent is empty; an emptied partition then
stays listed as a partition forever, and every data file cost five extra requests."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.objectstore

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)


def _objects(endpoint: str, table_uri: str) -> dict[str, int]:
    """Every object under the table's folder, with its size."""
    import boto3

    bucket, _, prefix = table_uri.removeprefix("s3://").partition("/")
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION)
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        out.update({o["Key"][len(prefix) + 1:]: o["Size"] for o in page.get("Contents", [])})
    return out


def test_writes_and_deletes_leave_no_directory_markers(s3_server, s3_warehouse):
    catalog = Catalog(s3_warehouse)
    catalog.create_database("db")
    fields: list[pa.Field] = [pa.field("id", pa.int64()), pa.field("p", pa.string())]
    table = catalog.create_table("db.t", pa.schema(fields), primary_keys=["p", "id"], partition_keys=["p"],
                                 options={"bucket": "2"})
    table.write(pa.table({"id": pa.array(range(6), pa.int64()), "p": ["a", "b"] * 3}))
    table.write(pa.table({"id": pa.array(range(3), pa.int64()), "p": ["a"] * 3}))
    table.delete(pa.table({"id": pa.array([1, 3, 5], pa.int64()), "p": ["b"] * 3}))
    table.maintenance.compact()
    table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE)

    objects = _objects(s3_server.endpoint, table.path)
    assert [k for k in objects if k.endswith("/")] == []
    # The sizes the manifests record (taken from the upload stream) are the objects' sizes.
    entries = table.file_entries(table.latest_snapshot())
    assert entries
    for e in entries:
        key = table.data_file_path(table.partition_codec.from_bytes(e.partition), e.bucket, e.file)
        assert objects[key[len(table.path) + 1:]] == e.file.file_size
    assert table.read().sort_by("id").column("id").to_pylist() == [0, 1, 2, 4]
