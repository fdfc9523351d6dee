"""Consumers: Paimon's `consumer/consumer-<id>` files, reading from them, and expiry that waits for them."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest

from airflow_paimon.format.consumers import ConsumerNotFoundError
from airflow_paimon.format.errors import InvalidOptionError, SnapshotExpiredError
from airflow_paimon.format.system_tables import system_table

from .test_changes import make, rows
from .upkeep_helpers import tree_digest


def test_lifecycle_and_the_file_paimon_reads(catalog):
    t = make(catalog)
    t.write(rows([1]))
    t.write(rows([2]))
    assert t.consumers.create("billing") == 3
    path = f"{t.path}/consumer/consumer-billing"
    assert json.loads(open(path).read()) == {"nextSnapshot": 3}
    assert t.consumers.create("audit", 1) == 1
    assert t.consumers.positions() == {"billing": 3, "audit": 1}
    assert t.consumers.advance("audit", 2) == 2
    with pytest.raises(InvalidOptionError, match="move it back"):
        t.consumers.advance("audit", 1)
    assert t.consumers.reset("audit", 1) == 1
    with pytest.raises(InvalidOptionError, match="outside"):
        t.consumers.reset("audit", 9)
    with pytest.raises(InvalidOptionError, match="already exists"):
        t.consumers.create("audit")
    t.consumers.delete("audit")
    assert not os.path.exists(f"{t.path}/consumer/consumer-audit")
    with pytest.raises(ConsumerNotFoundError, match="'billing'"):
        t.consumers.delete("audit")
    assert t.inspect.consumers().to_pylist() == [{"consumer_id": "billing", "next_snapshot_id": 3}]


@pytest.mark.parametrize("bad", ["", "..", "a/b", "a\\b", "x" * 201, "tab\there", 7])
def test_bad_ids_are_refused_before_any_file_is_touched(catalog, tmp_path, bad):
    t = make(catalog)
    t.write(rows([1]))
    before = tree_digest(tmp_path)
    with pytest.raises(InvalidOptionError, match="consumer id"):
        t.consumers.create(bad)
    assert tree_digest(tmp_path) == before


def test_reading_from_a_consumer_does_not_move_it(catalog):
    t = make(catalog)
    t.write(rows([1]))
    t.consumers.create("etl")
    t.write(rows([2]))
    t.write(rows([3]))
    first = t.changes(consumer_id="etl", mode="delta").read_all()
    assert first.column("id").to_pylist() == [2, 3]
    again = t.changes(consumer_id="etl", mode="delta").read_all()   # a failed downstream reads the same rows
    assert again.equals(first)
    t.consumers.advance("etl", 4)
    assert t.changes(consumer_id="etl", mode="delta").read_all().num_rows == 0
    with pytest.raises(InvalidOptionError, match="either start or consumer_id"):
        t.changes(1, consumer_id="etl")


def test_expiry_keeps_what_a_consumer_needs_and_an_expired_position_is_an_error(catalog):
    t = make(catalog)
    t.write(rows([1]))
    t.consumers.create("slow", 2)
    for i in range(2, 6):
        t.write(rows([i]))
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, now="2100-01-01")
    assert [s.id for s in t.snapshots()][0] == 2
    assert t.changes(consumer_id="slow", mode="delta").read_all().column("id").to_pylist() == [2, 3, 4, 5]
    t.consumers.delete("slow")
    t.consumers.create("late", 3)
    t.consumers.delete("late")
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, now="2100-01-01")
    # a consumer file another engine left behind, pointing at an expired snapshot
    (open(f"{t.path}/consumer/consumer-stale", "w")).write(json.dumps({"nextSnapshot": 2}))
    with pytest.raises(SnapshotExpiredError, match="consumer 'stale'.*reset it"):
        t.changes(consumer_id="stale")


def test_consumer_expiration_time_lets_idle_consumers_lapse(catalog):
    t = make(catalog, **{"consumer.expiration-time": "1 h"})
    t.write(rows([1]))
    t.consumers.create("idle", 1)
    t.consumers.create("busy", 1)
    for i in range(2, 5):
        t.write(rows([i]))
    old = time.time() - 2 * 3600
    os.utime(f"{t.path}/consumer/consumer-idle", (old, old))
    dry = t.maintenance.expire_snapshots(retain_min=1, retain_max=1, now="2100-01-01", dry_run=True)
    assert dry.snapshots == []
    assert set(t.consumers.positions()) == {"idle", "busy"}     # a dry run deletes nothing
    t.consumers.delete("busy")
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, now="2100-01-01")
    assert t.consumers.positions() == {}
    assert [s.id for s in t.snapshots()] == [4]


def test_audit_log_and_binlog(catalog):
    t = make(catalog)
    t.write(rows([1, 2]))
    t.write(rows([1], tag="w"))
    t.delete(pa.table({"id": [2], "dt": ["a"]}))
    audit = t.inspect.audit_log()
    assert audit.column_names[0] == "rowkind"
    assert sorted((r["rowkind"], r["id"]) for r in audit.to_pylist()) == [("+I", 1), ("-D", 2)]
    ranged = t.inspect.audit_log(start=1, end=3, mode="diff").to_pylist()
    assert [(r["rowkind"], r["id"], r["v"]) for r in ranged] == [("-D", 2, "v2"), ("-U", 1, "v1"), ("+U", 1, "w1")]
    binlog = t.inspect.binlog(start=1, end=3, mode="diff").to_pylist()
    assert [(r["rowkind"], r["id"], r["v"]) for r in binlog] == [("-D", [2], ["v2"]), ("+U", [1, 1], ["v1", "w1"])]
    latest = t.inspect.binlog().to_pylist()
    assert sorted((r["rowkind"], r["v"]) for r in latest) == [("+I", ["w1"]), ("-D", [None])]
    with pytest.raises(InvalidOptionError, match="no change range"):
        system_table(t, "$snapshots", start=1)


def test_expiry_waits_for_a_consumer_another_engine_named_outside_our_id_rule(catalog):
    t = make(catalog)
    for i in range(4):
        t.write(rows([i]))
    os.makedirs(f"{t.path}/consumer")
    open(f"{t.path}/consumer/consumer-nightly job", "w").write(json.dumps({"nextSnapshot": 2}))
    t.maintenance.expire_snapshots(retain_min=1, retain_max=1, now="2100-01-01")
    assert [s.id for s in t.snapshots()] == [2, 3, 4]
    assert t.consumers.positions() == {"nightly job": 2}
