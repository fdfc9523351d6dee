"""A store that ignores conditional writes (an older S3-compatible server, played by a proxy in front of the local
S3 server that drops the precondition headers; obstore's metadata requests only, pyarrow's streamed uploads are
not forwarded by it) is refused at the first commit, unless `lock.enabled`."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import UnsafeStoreError
from airflow_paimon.format.fileio import FileIO

pytestmark = pytest.mark.objectstore

DROPPED = {"if-none-match", "if-match"}


def _forwarding_handler(target_port: int) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            # Servers check the signature of the signed headers only; the preconditions are not among them here.
            headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED}
            conn = http.client.HTTPConnection("127.0.0.1", target_port, timeout=30)
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            self.send_response(reply.status)
            for k, v in reply.getheaders():
                if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, *args: object) -> None:
            pass

    return Forward


@pytest.fixture
def old_store(s3_server) -> Iterator[dict[str, str]]:
    port = int(s3_server.endpoint.rsplit(":", 1)[1])
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _forwarding_handler(port))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield {**s3_server.options(), "s3.endpoint": f"http://127.0.0.1:{proxy.server_address[1]}"}
    finally:
        proxy.shutdown()


def _table(warehouse: str, options: dict[str, str]):
    catalog = Catalog(warehouse, options)
    catalog.create_database("db")
    return catalog.create_table("db.t", pa.schema([("id", pa.int64())]), primary_keys=["id"],
                                options={"bucket": "1"})


def test_a_store_ignoring_conditional_writes_is_refused(s3_server, old_store):
    warehouse = f"s3://{s3_server.new_bucket()}/wh"
    with pytest.raises(UnsafeStoreError, match="ignores conditional writes .* set the catalog option "
                                               "lock.enabled=true"):
        _table(warehouse, old_store)
    # Nothing was committed: no schema, no snapshot.
    assert [f.path for f in Catalog(warehouse, s3_server.options()).io.walk(warehouse)] == []


def test_with_the_lock_create_once_files_have_one_winner(s3_server, old_store, tmp_path):
    warehouse = f"s3://{s3_server.new_bucket()}/wh"
    io = FileIO(warehouse, {**old_store, "lock.enabled": "true", "lock.dir": str(tmp_path)})
    path = f"{warehouse}/db.db/t/snapshot/snapshot-1"
    assert io.create_exclusive(path, b"first")
    assert not io.create_exclusive(path, b"second")
    assert io.read_bytes(path) == b"first"
