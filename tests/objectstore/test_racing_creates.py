"""Creates of one object racing on the tests' S3 server: exactly one wins and its bytes are the object's, as on S3.
The commit tests rest on this; moto's own server let two racing creates both win (tests/s3_server.py)."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from airflow_paimon.format.object_store import ConditionalStore

pytestmark = pytest.mark.objectstore

RACERS, OBJECTS = 6, 60


def test_racing_creates_of_one_object_have_one_winner(s3_server):
    bucket = s3_server.new_bucket()
    store = ConditionalStore("s3", bucket, s3_server.options())
    barrier = threading.Barrier(RACERS)

    def race(racer: int) -> list[bool]:
        won = []
        for n in range(OBJECTS):
            barrier.wait()   # every racer sends its create of object n at once
            won.append(store.create(f"s3://{bucket}/race/snapshot-{n}", f"racer-{racer}".encode()))
        return won

    # The server runs in this process: switching threads often (Python's default is every 5 ms) gives its request
    # threads every chance to interleave between a condition's check and the write.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(RACERS) as pool:
            results = list(pool.map(race, range(RACERS)))
    finally:
        sys.setswitchinterval(interval)
    for n in range(OBJECTS):
        winners = [racer for racer in range(RACERS) if results[racer][n]]
        assert len(winners) == 1, (n, winners)
        assert store.read(f"s3://{bucket}/race/snapshot-{n}") == f"racer-{winners[0]}".encode()
