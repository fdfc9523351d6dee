"""Paimon tables for the Airflow tests, with commits made at chosen instants.

The snapshot a periodic tag points at depends on when each snapshot was committed. Tests of past periods
(backfills) need commits on past days, which real time cannot give, so ``commit_at`` runs the library's
ordinary commit with its clock set to a chosen instant: the snapshot is written once, atomically, by the same
code path as any commit, with that commit time (nothing is rewritten afterwards). Tests of the live path
instead choose the table's time zone so that a period boundary falls a few seconds from now
(``offset_for_boundary``) and commit at real times.

No Airflow imports here: the e2e tests use this module in the test process before Airflow starts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
import types
from collections.abc import Iterator

import pyarrow as pa

from airflow_paimon.format import Catalog, Table
from airflow_paimon.format import commit as _commit_module

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])


def create_table(warehouse: str, identifier: str, options: dict[str, str] | None = None,
                 primary_key: bool = True) -> Table:
    catalog = Catalog(warehouse)
    catalog.create_database(identifier.split(".")[0], ignore_if_exists=True)
    return catalog.create_table(identifier, SCHEMA, primary_keys=["id"] if primary_key else (),
                                options=options or {})


def rows(*ids: int, label: str = "v") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "value": [f"{label}{i}" for i in ids]}, schema=SCHEMA)


@contextlib.contextmanager
def commit_clock(when: dt.datetime) -> Iterator[None]:
    """Make the library's commits read ``when`` as the current time (the commit module's clock only)."""
    if when.tzinfo is None:
        raise ValueError("commit_clock needs an aware datetime")
    seconds = when.timestamp()
    real = _commit_module.time
    _commit_module.time = types.SimpleNamespace(time=lambda: seconds, sleep=real.sleep, monotonic=real.monotonic)
    try:
        yield
    finally:
        _commit_module.time = real


def commit_at(table: Table, when: dt.datetime, *ids: int, label: str = "v") -> int:
    """Write ``ids`` as one commit made at ``when``; returns the snapshot id (checked to carry that time)."""
    with commit_clock(when):
        snapshot = table.write(rows(*ids, label=label))
    assert snapshot is not None
    expected = int(when.timestamp() * 1000)
    assert snapshot.time_millis == expected, (
        f"the commit did not take the injected time ({snapshot.time_millis} != {expected}): the format "
        f"library's commit clock changed; update tests/e2e/tables.commit_clock")
    return snapshot.id


def commit_now(table: Table, *ids: int, label: str = "v") -> tuple[int, int]:
    """One commit at the real current time; returns (snapshot id, commit time in epoch millis)."""
    snapshot = table.write(rows(*ids, label=label))
    assert snapshot is not None
    return snapshot.id, snapshot.time_millis


def offset_for_boundary(boundary: dt.datetime) -> str:
    """A fixed UTC offset (``+hh:mm:ss``) whose local midnight falls on ``boundary`` (whole seconds)."""
    seconds = int(boundary.timestamp()) % 86_400  # seconds after UTC midnight
    offset = -seconds if seconds <= 43_200 else 86_400 - seconds  # local = utc + offset = 00:00
    sign = "+" if offset >= 0 else "-"
    offset = abs(offset)
    return f"{sign}{offset // 3600:02d}:{offset % 3600 // 60:02d}:{offset % 60:02d}"


def sleep_until(when: dt.datetime) -> None:
    delay = when.timestamp() - time.time()
    if delay > 0:
        time.sleep(delay)


def connection_json(warehouse: str) -> str:
    """The value of ``AIRFLOW_CONN_PAIMON_DEFAULT`` for a local warehouse."""
    return json.dumps({"conn_type": "paimon", "extra": {"warehouse": warehouse}})
