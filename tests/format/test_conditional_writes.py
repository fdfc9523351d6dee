"""The writes commits rest on, on a local disk and (marker objectstore) on the local S3 server: create-if-absent
answers False to the loser of a race and leaves the winner's bytes; replace-if-unchanged refuses a stale version."""

from __future__ import annotations

import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.fileio import FileIO


def test_create_if_absent_has_one_winner(warehouse):
    io = Catalog(warehouse).io
    path = f"{warehouse}/db.db/t/snapshot/snapshot-1"
    assert io.create_exclusive(path, b"first")
    assert not io.create_exclusive(path, b"second")
    assert io.read_bytes(path) == b"first"


def test_replace_if_unchanged_refuses_a_stale_version(warehouse):
    io = Catalog(warehouse).io
    path = f"{warehouse}/db.db/t/consumer/consumer-c"
    io.write_bytes(path, b'{"nextSnapshot": 2}')
    data, version = io.read_versioned(path)
    assert data == b'{"nextSnapshot": 2}'
    assert io.replace_if_unchanged(path, b'{"nextSnapshot": 5}', version)
    assert not io.replace_if_unchanged(path, b'{"nextSnapshot": 3}', version)  # read before the 5 landed
    assert io.read_bytes(path) == b'{"nextSnapshot": 5}'
    assert io.read_versioned(f"{warehouse}/db.db/t/consumer/consumer-none") is None


def test_the_lock_serialises_creates_on_a_local_disk(tmp_path):
    io = FileIO(str(tmp_path), {"lock.enabled": "true", "lock.dir": str(tmp_path / "locks")})
    assert io.create_exclusive(f"{tmp_path}/a", b"1") and not io.create_exclusive(f"{tmp_path}/a", b"2")


@pytest.mark.parametrize("key", ["lock.enabled", "object-store.conditional-writes"])
def test_switches_take_only_true_or_false(tmp_path, key):
    with pytest.raises(InvalidOptionError, match=f"filesystem option {key}: 'yes' is not 'true' or 'false'"):
        FileIO(str(tmp_path), {key: "yes"})
