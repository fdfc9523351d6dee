"""A real S3-compatible server for the tests: moto's server mode on 127.0.0.1, one per test session.

moto honours ``If-None-Match: *`` and ``If-Match`` on PUT, the conditional writes the library's commits rest on,
but not atomically: it checks the condition, then stores the object, and its threaded server lets two racing
creates of one key both pass the check (both answered 200, the later object replacing the earlier). S3 decides
each conditional write atomically; this server does once its PUTs are serialised (`_atomic_puts`).
Each test gets a bucket of its own, so tests never see each other's tables.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ACCESS_KEY = "testing"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def options(self) -> dict[str, str]:
        """The catalog options of a warehouse on this server, under Paimon's names."""
        return {"s3.endpoint": self.endpoint, "s3.access-key": ACCESS_KEY, "s3.secret-key": SECRET_KEY,
                "s3.path.style.access": "true", "s3.region": REGION}

    def environment(self) -> dict[str, str]:
        """The same settings as the standard AWS variables, for code that opens a warehouse without options."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_ALLOW_HTTP": "true", "AWS_EC2_METADATA_DISABLED": "true"}

    def new_bucket(self) -> str:
        import boto3

        name = f"wh-{uuid.uuid4().hex[:16]}"
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY, region_name=REGION).create_bucket(Bucket=name)
        return name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _atomic_puts() -> None:
    """Serialise moto's PUT object handler, so that its check of a write's condition and the write are one step."""
    from moto.s3.responses import S3Response

    if getattr(S3Response.put_object, "serialised", False):
        return
    original = S3Response.put_object
    lock = threading.Lock()

    def put_object(self: S3Response) -> object:
        with lock:
            return original(self)

    put_object.serialised = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object  # type: ignore[method-assign,assignment]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    _atomic_puts()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture
def s3_warehouse(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A warehouse URI in a fresh bucket; the AWS variables point at the server for the test's duration."""
    for key, value in s3_server.environment().items():
        monkeypatch.setenv(key, value)
    return f"s3://{s3_server.new_bucket()}/warehouse"


__all__ = ["S3Server", "free_port", "s3_server", "s3_warehouse", "ACCESS_KEY", "SECRET_KEY", "REGION"]
