"""What a one-row commit asks of an S3 store, from the server's own request log: on a real region each request is
a 10-30 ms round trip, so requests a commit does not need are latency every writer pays.

- a data file small enough for one part is one PUT, not a multipart upload (three requests);
- checking that the next snapshot id is free is one HEAD, never a listing (pyarrow's file info lists the
  prefix when no object has the name, in case it is a "directory");
- the manifest lists the write read for its base are not read again by its commit;
- nothing is asked after the snapshot and its hint are written (the latest snapshot is looked up again only
  for a table whose `full-compaction.delta-commits` may call for a compaction).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog

pytestmark = pytest.mark.objectstore

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


class _Requests(logging.Handler):
    """The request lines the in-process server logs ("GET /bucket/key HTTP/1.1")."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r'"([A-Z]+ \S+) HTTP', record.getMessage())
        if found:
            self.lines.append(found.group(1))


@pytest.fixture
def store_requests() -> Iterator[_Requests]:
    log = logging.getLogger("werkzeug")
    handler, level = _Requests(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def test_a_one_row_commit_sends_no_request_it_can_do_without(s3_warehouse, store_requests):
    catalog = Catalog(s3_warehouse)
    catalog.create_database("db")
    table = catalog.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for i in range(3):
        table.write(pa.table({"id": [i], "v": ["a"]}, schema=SCHEMA))
    store_requests.lines.clear()

    snapshot = table.write(pa.table({"id": [9], "v": ["b"]}, schema=SCHEMA))

    assert snapshot is not None and snapshot.id == 4
    lines = store_requests.lines
    data_puts = [r for r in lines if r.startswith("PUT ") and "/bucket-0/data-" in r]
    assert len(data_puts) == 1 and "?" not in data_puts[0], lines
    assert not [r for r in lines if r.startswith("POST ")], lines            # no multipart upload
    assert not [r for r in lines if "prefix=" in r and "snapshot" in r], lines   # no listing of snapshot ids
    lists = [r for r in lines if r.startswith("GET ") and "/manifest/manifest-list-" in r]
    assert len(lists) == len(set(lists)), lines                             # each manifest list read once
    created = [i for i, r in enumerate(lines) if r.startswith("PUT ") and r.endswith("/snapshot/snapshot-4")]
    assert len(created) == 1, lines
    assert [r.split(" ")[0] + " " + r.rsplit("/", 1)[-1] for r in lines[created[0] + 1:]] == ["PUT LATEST"], lines
    assert sorted(table.read().column("id").to_pylist()) == [0, 1, 2, 9]
