"""The lock that serialises commits of a table on a store without conditional writes (``lock.enabled``).

Paimon's catalog lock lives in a Hive metastore or a JDBC database; this library has neither, so its lock is an
exclusive ``flock`` on a file named after the locked directory, under ``lock.dir`` (default: the system's
temporary directory). It serialises every process of one host, and of several hosts only when ``lock.dir`` is on
a filesystem they share whose locks are honoured (NFSv4, not plain object storage).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def locked(lock_dir: str | None, name: str) -> Iterator[None]:
    """Hold the lock of `name` (a table or directory URI) for the duration of the block."""
    folder = lock_dir or os.path.join(tempfile.gettempdir(), "airflow-paimon-locks")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, hashlib.sha256(name.encode()).hexdigest()[:32] + ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
