"""The tag and expiry operators against real tables on disk (execute() with a run's context)."""

from __future__ import annotations

import datetime as dt
import types

import pendulum
import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_paimon.assets import paimon_table_asset, table_asset_uri
from airflow_paimon.operators import (
    CreateTagOperator,
    DeleteTagOperator,
    ExpireSnapshotsOperator,
    RollbackOperator,
)
from tests.e2e.tables import commit_at, create_table

pytestmark = pytest.mark.airflow

UTC = "UTC"


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz=UTC)


class FakeTI:
    def __init__(self) -> None:
        self.xcoms: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcoms[key] = value


def run_context(start=None, end=None, logical_date=None, run_after=None) -> dict:
    """What a task's context holds about its run (the parts the operators read)."""
    return {
        "data_interval_start": start,
        "data_interval_end": end,
        "logical_date": logical_date,
        "dag_run": types.SimpleNamespace(run_after=run_after),
        "ti": FakeTI(),
        "outlet_events": OutletEventAccessors(),
    }


def daily(logical_date: pendulum.DateTime) -> dict:
    """A ``@daily`` cron run of Airflow 3: an empty data interval at the logical date."""
    return run_context(logical_date, logical_date, logical_date, logical_date)



@pytest.fixture
def table(warehouse):
    """A table tagged daily at 02:30 UTC, with commits around the 2026-11-11 period's end and creation time:

    s1 2026-11-11 10:00, s2 2026-11-11 23:59:59, s3 2026-11-12 00:30 (after the period, before 02:30),
    s4 2026-11-12 02:30:00.001 (just after the tag is due), s5 2026-11-13 01:00.
    """
    t = create_table(warehouse, "db.orders", {"tag.create-time": "02:30"})
    t.snapshot_ids = {
        "s1": commit_at(t, utc(2026, 11, 11, 10), 1),
        "s2": commit_at(t, utc(2026, 11, 11, 23, 59, 59), 2),
        "s3": commit_at(t, utc(2026, 11, 12, 0, 30), 3),
        "s4": commit_at(t, utc(2026, 11, 12, 2, 30, 0, 1000), 4),
        "s5": commit_at(t, utc(2026, 11, 13, 1), 5),
    }
    return t


def test_table_asset_uri():
    assert table_asset_uri("/data/wh", "db.t") == "paimon:///data/wh/db.t"
    assert table_asset_uri("file:///data/wh/", "db.t") == "paimon:///data/wh/db.t"
    assert table_asset_uri("s3://bucket/wh/", "db.t") == "paimon://bucket/wh/db.t"
    assert table_asset_uri("s3a://key:secret@bucket:9000/wh", "db.t") == "paimon://bucket:9000/wh/db.t"


def test_the_table_asset_is_the_asset_a_dag_author_writes(monkeypatch):
    # The same name and URI as the literal Asset(...) of the documented form: one asset, not two.
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", '{"conn_type": "paimon", "extra": {"warehouse": "/data/wh"}}')
    asset = paimon_table_asset("db.t", "lake")
    assert asset == Asset("paimon:///data/wh/db.t")
    assert (asset.name, asset.uri) == ("paimon:///data/wh/db.t", Asset("paimon:///data/wh/db.t").uri)
    assert paimon_table_asset("db.t", warehouse="s3://bucket/wh") == Asset("paimon://bucket/wh/db.t")
    monkeypatch.setenv("AIRFLOW_CONN_URI_FORM", "paimon://?warehouse=%2Fdata%2Fwh")
    assert paimon_table_asset("db.t", "uri_form") == asset


def test_the_table_asset_needs_a_connection_readable_without_io(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_NOWHERE", raising=False)
    with pytest.raises(ValueError, match="AIRFLOW_CONN_NOWHERE.*warehouse="):
        paimon_table_asset("db.t", "nowhere")
    with pytest.raises(ValueError, match="table: 'orders' names no database"):
        paimon_table_asset("orders", warehouse="/data/wh")


# ---------------------------------------------------------------------------------------------------------
# CreateTagOperator
# ---------------------------------------------------------------------------------------------------------


def test_daily_run_tags_latest_snapshot_at_or_before_creation_instant(table, now):
    op = CreateTagOperator(task_id="tag", table="db.orders")
    ctx = daily(utc(2026, 11, 12))
    result = op.execute(ctx)
    assert result["tag"] == "2026-11-11"
    # s3 was committed after the period but before 02:30, s4 a millisecond after: s3 it is.
    assert result["snapshot_id"] == table.snapshot_ids["s3"]
    assert result["status"] == "created"
    assert result["due"] == utc(2026, 11, 12, 2, 30).isoformat()
    assert result["period_start"] == utc(2026, 11, 11).isoformat()
    assert table.tags.get("2026-11-11").snapshot.id == table.snapshot_ids["s3"]
    assert ctx["ti"].xcoms == {"tag_name": "2026-11-11", "snapshot_id": table.snapshot_ids["s3"]}


def test_run_with_timetable_interval_tags_its_period(table, now):
    ctx = run_context(utc(2026, 11, 12), utc(2026, 11, 13), utc(2026, 11, 12), utc(2026, 11, 13, 2, 30))
    result = CreateTagOperator(task_id="tag", table="db.orders").execute(ctx)
    assert (result["tag"], result["snapshot_id"]) == ("2026-11-12", table.snapshot_ids["s5"])


def test_rerun_is_idempotent(table, now):
    op = CreateTagOperator(task_id="tag", table="db.orders")
    first = op.execute(daily(utc(2026, 11, 12)))
    tag_file = table.tags.path("2026-11-11")
    before = table.io.read_bytes(tag_file)
    again = op.execute(daily(utc(2026, 11, 12)))
    assert again["status"] == "unchanged"
    assert again["snapshot_id"] == first["snapshot_id"]
    assert table.io.read_bytes(tag_file) == before


def test_existing_tag_on_another_snapshot(table, now):
    table.tags.create("2026-11-11", snapshot_id=table.snapshot_ids["s1"])
    with pytest.raises(AirflowFailException, match="already exists on snapshot 1"):
        CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 12)))
    assert table.tags.get("2026-11-11").snapshot.id == table.snapshot_ids["s1"]

    result = CreateTagOperator(task_id="tag", table="db.orders", if_exists="replace").execute(
        daily(utc(2026, 11, 12))
    )
    assert (result["status"], result["snapshot_id"]) == ("replaced", table.snapshot_ids["s3"])
    assert table.tags.get("2026-11-11").snapshot.id == table.snapshot_ids["s3"]


def test_if_exists_fail_fails_even_on_the_same_snapshot(table, now):
    CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 12)))
    op = CreateTagOperator(task_id="tag", table="db.orders", if_exists="fail")
    with pytest.raises(AirflowFailException, match="already exists"):
        op.execute(daily(utc(2026, 11, 12)))


def test_if_exists_is_checked():
    with pytest.raises(ValueError, match="if_exists"):
        CreateTagOperator(task_id="tag", table="db.t", if_exists="overwrite")


def test_expired_snapshot_is_a_clear_error_and_no_tag(table, now):
    # Keep only s4 and s5: the snapshot the 2026-11-11 tag needs (s3) is gone, and so is any proof of it.
    table.maintenance.expire_snapshots(retain_min=2, older_than=utc(2026, 11, 20))
    assert [s.id for s in table.snapshots()] == [table.snapshot_ids["s4"], table.snapshot_ids["s5"]]
    with pytest.raises(AirflowFailException, match="SnapshotExpiredError: the snapshots of db.orders from .* have "
                                                   "expired"):
        CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 12)))
    assert not table.tags.exists("2026-11-11")
    # The next period is still exact: s5 is retained and s4 proves nothing between them was lost.
    result = CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 13)))
    assert result["snapshot_id"] == table.snapshot_ids["s5"]


def test_a_period_with_no_snapshot_yet_is_a_clear_error(table, now):
    with pytest.raises(AirflowFailException, match="no snapshot committed at or before"):
        CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 10)))
    assert table.tags.names() == []


def test_a_tag_that_is_not_due_yet_is_refused(table, now):
    now(utc(2026, 11, 12, 2, 29, 59))
    with pytest.raises(AirflowException, match="not due until 2026-11-12T02:30:00"):
        CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 12)))
    assert table.tags.names() == []
    now(utc(2026, 11, 12, 2, 30))
    assert CreateTagOperator(task_id="tag", table="db.orders").execute(daily(utc(2026, 11, 12)))["tag"]


# ---------------------------------------------------------------------------------------------------------
# Tables Paimon auto-tags (tag.automatic-creation = process-time): Paimon's rule, not tag.create-time's
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def flink_table(warehouse):
    """A table Flink tags daily (process-time, 10 min delay), with commits (UTC):

    s1 11-01 10:00, s2 11-02 00:05 (inside the delay), s3 11-02 00:12, s4 11-02 12:00, nothing on 11-03 and
    11-04 until s5 11-05 00:05, s6 11-06 00:30. Paimon's TagAutoCreation tags 10-31 on s1 (its first
    snapshot), 11-01 on s3 (the first at or after 11-02 00:10), 11-04 on s5 (11-05 00:05 - 10 min >= 11-03, and
    floor(11-05) - 1 day = 11-04), 11-05 on s6; 11-02 and 11-03 get none.
    """
    t = create_table(warehouse, "db.flink", {"tag.automatic-creation": "process-time", "tag.creation-delay": "10 min"})
    t.snapshot_ids = {
        "s1": commit_at(t, utc(2026, 11, 1, 10), 1),
        "s2": commit_at(t, utc(2026, 11, 2, 0, 5), 2),
        "s3": commit_at(t, utc(2026, 11, 2, 0, 12), 3),
        "s4": commit_at(t, utc(2026, 11, 2, 12), 4),
        "s5": commit_at(t, utc(2026, 11, 5, 0, 5), 5),
        "s6": commit_at(t, utc(2026, 11, 6, 0, 30), 6),
    }
    return t


def test_paimons_own_tag_for_the_period_is_accepted(flink_table, now):
    # Flink already made 2026-11-01, on the first snapshot at or after 11-02 00:10 (s3, not s2).
    flink_table.tags.create("2026-11-01", snapshot_id=flink_table.snapshot_ids["s3"])
    result = CreateTagOperator(task_id="tag", table="db.flink").execute(daily(utc(2026, 11, 2)))
    assert (result["tag"], result["status"], result["snapshot_id"]) == ("2026-11-01", "unchanged", 3)


def test_auto_tagged_table_gets_paimons_tags(flink_table, now):
    op = CreateTagOperator(task_id="tag", table="db.flink")
    results = {day: op.execute(daily(utc(2026, 11, day + 1))) for day in (5, 1, 4)}  # in any order
    assert {r["tag"]: r["snapshot_id"] for r in results.values()} == {"2026-11-01": 3, "2026-11-04": 5,
                                                                      "2026-11-05": 6}
    for day in (2, 3):
        with pytest.raises(AirflowSkipException, match=f"Paimon makes no tag '2026-11-0{day}'.*makes '2026-11-04'"):
            op.execute(daily(utc(2026, 11, day + 1)))
    with pytest.raises(AirflowException, match="no snapshot of db.flink committed at or after 2026-11-07 00:10"):
        op.execute(daily(utc(2026, 11, 7)))
    assert sorted(flink_table.tags.names()) == ["2026-11-01", "2026-11-04", "2026-11-05"]


def test_named_tag_on_a_templated_snapshot_id(table, now):
    op = CreateTagOperator(task_id="tag", table="db.orders", tag_name="release-1", snapshot_id="2")
    result = op.execute(daily(utc(2026, 11, 12)))
    assert (result["tag"], result["snapshot_id"], result["period_start"]) == ("release-1", 2, None)
    # A named tag with nothing else tags the latest snapshot.
    latest = CreateTagOperator(task_id="tag2", table="db.orders", tag_name="latest-one").execute(run_context())
    assert latest["snapshot_id"] == table.snapshot_ids["s5"]
    # A period name with an explicit time.
    at = CreateTagOperator(task_id="tag3", table="db.orders", as_of="2026-11-11T12:00:00+00:00").execute(
        daily(utc(2026, 11, 12))
    )
    assert (at["tag"], at["snapshot_id"]) == ("2026-11-11", table.snapshot_ids["s1"])


def test_bad_arguments_fail_cleanly(table, now):
    with pytest.raises(ValueError, match="snapshot_id: expected a whole number"):
        CreateTagOperator(task_id="t", table="db.orders", tag_name="x", snapshot_id="two")
    with pytest.raises(ValueError, match="tag_name: .*numeric"):
        CreateTagOperator(task_id="t", table="db.orders", tag_name="123")
    with pytest.raises(AirflowFailException, match="does not exist"):
        CreateTagOperator(task_id="t", table="db.missing").execute(daily(utc(2026, 11, 12)))
    assert table.tags.names() == []


def test_asset_event_through_the_alias(table, warehouse, now):
    op = CreateTagOperator(task_id="tag", table="db.orders")
    assert op.outlets == [AssetAlias(name="paimon_tags")]
    ctx = daily(utc(2026, 11, 12))
    op.execute(ctx)
    events = ctx["outlet_events"][AssetAlias(name="paimon_tags")].asset_alias_events
    assert len(events) == 1
    expected = paimon_table_asset("db.orders")
    assert (events[0].dest_asset_key.name, events[0].dest_asset_key.uri) == (expected.name, expected.uri)
    assert expected.name == f"paimon://{warehouse}/db.orders"
    assert events[0].extra == {
        "tag": "2026-11-11",
        "snapshot_id": table.snapshot_ids["s3"],
        "previous_tag": None,
        "previous_snapshot_id": None,
        "table": "db.orders",
        "warehouse": warehouse,
        "status": "created",
        "period_start": "2026-11-11T00:00:00+00:00",
        "period_end": "2026-11-12T00:00:00+00:00",
        "run_type": None,
    }


def test_asset_event_names_the_previous_periodic_tag(table, now):
    """The next period's event carries the range a downstream export reads: (previous tag, tag]."""
    op = CreateTagOperator(task_id="tag", table="db.orders")
    op.execute(daily(utc(2026, 11, 12)))
    ctx = daily(utc(2026, 11, 13))
    result = op.execute(ctx)
    [event] = ctx["outlet_events"][AssetAlias(name="paimon_tags")].asset_alias_events
    assert {k: event.extra[k] for k in ("tag", "snapshot_id", "previous_tag", "previous_snapshot_id")} == {
        "tag": "2026-11-12", "snapshot_id": table.snapshot_ids["s5"],
        "previous_tag": "2026-11-11", "previous_snapshot_id": table.snapshot_ids["s3"]}
    assert (result["previous_tag"], result["previous_snapshot_id"]) == ("2026-11-11", table.snapshot_ids["s3"])


def test_asset_event_on_a_given_asset(table, now):
    asset = Asset("paimon://lake/db/orders")
    op = CreateTagOperator(task_id="tag", table="db.orders", asset=asset)
    assert op.outlets == [asset]
    ctx = daily(utc(2026, 11, 12))
    op.execute(ctx)
    assert ctx["outlet_events"][asset].extra["tag"] == "2026-11-11"
    assert ctx["outlet_events"][asset].extra["snapshot_id"] == table.snapshot_ids["s3"]


def test_periodic_tags_beyond_num_retained_max_expire(warehouse, now):
    t = create_table(warehouse, "db.kept", {"tag.num-retained-max": "2"})
    for day in (10, 11, 12, 13):
        commit_at(t, utc(2026, 11, day, 12), day)
    t.tags.create("keep-me", snapshot_id=1)  # not periodic: never counted
    results = [
        CreateTagOperator(task_id="tag", table="db.kept").execute(daily(utc(2026, 11, day)))
        for day in (11, 12, 13)
    ]
    assert [r["expired_tags"] for r in results] == [[], [], ["2026-11-10"]]
    assert sorted(t.tags.names()) == ["2026-11-11", "2026-11-12", "keep-me"]


def test_templated_fields():
    assert set(CreateTagOperator.template_fields) >= {"table", "tag_name", "snapshot_id", "as_of", "time_retained"}
    assert "tag_name" in DeleteTagOperator.template_fields
    assert {"to_tag", "to_snapshot", "to_time", "is_dry_run"} <= set(RollbackOperator.template_fields)
    assert {"retain_min", "retain_max", "older_than"} <= set(ExpireSnapshotsOperator.template_fields)


def test_time_retained_is_written(table, now):
    CreateTagOperator(task_id="tag", table="db.orders", time_retained="7d").execute(daily(utc(2026, 11, 12)))
    assert table.tags.get("2026-11-11").time_retained == dt.timedelta(days=7)


# ---------------------------------------------------------------------------------------------------------
# DeleteTagOperator and RollbackOperator
# ---------------------------------------------------------------------------------------------------------


def test_delete_tag(table):
    table.tags.create("to-go", snapshot_id=2)
    result = DeleteTagOperator(task_id="d", table="db.orders", tag_name="to-go").execute(run_context())
    assert result["tags"] == ["to-go"]
    assert result["files_freed"] >= 1
    assert not table.tags.exists("to-go")
    with pytest.raises(AirflowFailException, match="does not exist"):
        DeleteTagOperator(task_id="d", table="db.orders", tag_name="to-go").execute(run_context())
    quiet = DeleteTagOperator(task_id="d", table="db.orders", tag_name="to-go", ignore_missing=True)
    assert quiet.execute(run_context())["tags"] == []


def test_rollback_to_tag_and_to_snapshot_id(table):
    table.tags.create("good", snapshot_id=3)
    table.tags.create("later", snapshot_id=5)
    dry = RollbackOperator(task_id="r", table="db.orders", to_tag="good", dry_run=True).execute(run_context())
    assert dry["dry_run"] and sorted(dry["snapshots"]) == [4, 5]
    assert table.latest_snapshot().id == 5

    result = RollbackOperator(task_id="r", table="db.orders", to_tag="good").execute(run_context())
    assert result["rolled_back_to"] == 3
    assert result["tags"] == ["later"]
    assert table.latest_snapshot().id == 3
    assert sorted(table.read()["id"].to_pylist()) == [1, 2, 3]

    RollbackOperator(task_id="r", table="db.orders", to_snapshot="2").execute(run_context())
    assert table.latest_snapshot().id == 2
    with pytest.raises(AirflowFailException, match="tag 'no-such-tag' does not exist"):
        RollbackOperator(task_id="r", table="db.orders", to_tag="no-such-tag").execute(run_context())


def test_rollback_target_is_explicit(table):
    with pytest.raises(ValueError, match="exactly one of to_tag, to_snapshot and to_time; got none"):
        RollbackOperator(task_id="r", table="db.orders")
    with pytest.raises(ValueError, match="got to_tag, to_time"):
        RollbackOperator(task_id="r", table="db.orders", to_tag="a", to_time="2026-11-11")
    with pytest.raises(AirflowFailException, match="in the future"):
        RollbackOperator(task_id="r", table="db.orders", to_time="2999-01-01").execute(run_context())
    with pytest.raises(ValueError, match="dry_run: expected True or False"):
        RollbackOperator(task_id="r", table="db.orders", to_snapshot=1, dry_run="maybe")
    with pytest.raises(ValueError, match="to_snapshot: must be at least 1"):
        RollbackOperator(task_id="r", table="db.orders", to_snapshot=0)
    with pytest.raises(ValueError, match="to_time: 'yesterday' is not a point in time; expected ISO 8601"):
        RollbackOperator(task_id="r", table="db.orders", to_time="yesterday")
    assert table.latest_snapshot().id == 5


# ---------------------------------------------------------------------------------------------------------
# ExpireSnapshotsOperator
# ---------------------------------------------------------------------------------------------------------


def test_expire_snapshots_summary(warehouse):
    t = create_table(warehouse, "db.events", {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"})
    for i in range(1, 6):
        commit_at(t, utc(2026, 11, 1, i), i)
    t.tags.create("first", snapshot_id=1, time_retained="1h")  # created now: not expired yet

    dry = ExpireSnapshotsOperator(task_id="x", table="db.events", dry_run=True).execute(run_context())
    assert dry["dry_run"] is True
    assert dry["snapshots_expired"] == 3 and dry["snapshots"]["snapshots"] == [1, 2, 3]
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4, 5]

    result = ExpireSnapshotsOperator(task_id="x", table="db.events").execute(run_context())
    assert result["snapshots_expired"] == 3
    assert result["tags_expired"] == 0
    assert result["files_freed"] > 0 and result["bytes_freed"] > 0
    assert result["files_freed"] == result["snapshots"]["files_freed"] + result["tags"]["files_freed"]
    assert "3 snapshot(s) and 0 tag(s) expired" in result["summary"]
    assert [s.id for s in t.snapshots()] == [4, 5]
    # The tag still reads: what it needs was kept.
    assert t.read(tag="first")["id"].to_pylist() == [1]
    # Everything in the result is plain JSON (XCom).
    import json

    assert json.loads(json.dumps(result)) == result


def test_expire_snapshots_arguments(warehouse):
    t = create_table(warehouse, "db.events", {})
    for i in range(1, 5):
        commit_at(t, utc(2026, 11, 1, i), i)
    result = ExpireSnapshotsOperator(
        task_id="x", table="db.events", retain_min="1", retain_max="10", older_than="2026-11-01T02:30:00+00:00",
        expire_tags=False,
    ).execute(run_context())
    assert result["snapshots"]["snapshots"] == [1]
    assert result["tags"] is None
    with pytest.raises(ValueError, match="retain_max: expected a whole number"):
        ExpireSnapshotsOperator(task_id="x", table="db.events", retain_max="many")


def test_expire_snapshots_arguments_meet_the_table_options_in_one_policy(warehouse):
    """The operator's limits override the table's as in the library and the command line; a limit that
    contradicts a table option fails the task naming both, and nothing is deleted."""
    t = create_table(warehouse, "db.events", {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    for i in range(1, 5):
        commit_at(t, utc(2026, 11, 1, i), i)
    conflict = r"retain_min: retain_min=3 is above retain_max=2 \(the table's snapshot.num-retained.max\)"
    with pytest.raises(AirflowFailException, match=conflict):
        ExpireSnapshotsOperator(task_id="x", table="db.events", retain_min=3, expire_tags=False).execute(run_context())
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4]
    result = ExpireSnapshotsOperator(task_id="x", table="db.events", older_than="0 s", max_deletes="1",
                                     expire_tags=False).execute(run_context())
    assert result["snapshots"]["snapshots"] == [1]


def test_package_exports():
    import airflow_paimon.operators as operators

    for name in operators.__all__:
        assert isinstance(getattr(operators, name), type), name
    from airflow_paimon.operators import CompactOperator, MergeIncrementalOperator, RemoveOrphanFilesOperator

    assert MergeIncrementalOperator.__module__ == "airflow_paimon.operators.merge"
    modules = {CompactOperator.__module__, RemoveOrphanFilesOperator.__module__}
    assert modules == {"airflow_paimon.operators.maintenance"}
