"""TagTimeSensor, TagSensor and their triggers: when they pass, how they defer, what the triggers yield."""

from __future__ import annotations

import asyncio
import importlib
import time
import types

import pendulum
import pytest
from airflow.models.trigger import Trigger
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from airflow_paimon.sensors import TagSensor, TagTimeSensor
from airflow_paimon.triggers import TagExistsTrigger, TagTimeTrigger
from tests.e2e.tables import commit_at, commit_now, create_table

pytestmark = pytest.mark.airflow


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


def daily(logical_date: pendulum.DateTime) -> dict:
    return {
        "data_interval_start": logical_date,
        "data_interval_end": logical_date,
        "logical_date": logical_date,
        "dag_run": types.SimpleNamespace(run_after=logical_date),
    }



@pytest.fixture
def table(warehouse):
    t = create_table(warehouse, "db.orders", {"tag.create-time": "02:30", "tag.create-interval": "1d"})
    commit_at(t, utc(2026, 11, 11, 10), 1)
    commit_at(t, utc(2026, 11, 11, 23), 2)
    return t


def first_event(trigger, timeout: float = 10.0):
    async def go():
        return await asyncio.wait_for(trigger.run().__anext__(), timeout)

    return asyncio.run(go())


def round_trip(trigger):
    """Through the triggerer's storage: serialize, store as a Trigger row's kwargs, re-create."""
    row = Trigger.from_object(trigger)
    module, _, name = row.classpath.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return cls(**row.kwargs)


# ---------------------------------------------------------------------------------------------------------
# Triggers
# ---------------------------------------------------------------------------------------------------------


def test_tag_time_trigger_serialize_round_trip():
    trigger = TagTimeTrigger(
        utc(2026, 11, 12, 2, 30), paimon_conn_id="lake", table="db.orders", data_after=utc(2026, 11, 12),
        poll_interval=5,
    )
    path, kwargs = trigger.serialize()
    assert path == "airflow_paimon.triggers.tags.TagTimeTrigger"
    again = round_trip(trigger)
    assert again.serialize() == (path, kwargs)
    assert again.moment == utc(2026, 11, 12, 2, 30) and again.data_after == utc(2026, 11, 12)
    # No warehouse, no options, no secrets in the kwargs: only the connection id.
    assert set(kwargs) == {"moment", "paimon_conn_id", "table", "data_after", "run_times", "wait_for_data",
                           "poll_interval"}


def test_tag_exists_trigger_serialize_round_trip():
    trigger = TagExistsTrigger(paimon_conn_id="lake", table="db.orders", tag_name="2026-11-11", poll_interval=3)
    assert round_trip(trigger).serialize() == trigger.serialize()
    assert trigger.serialize()[0] == "airflow_paimon.triggers.tags.TagExistsTrigger"


def test_trigger_checks_its_arguments():
    with pytest.raises(ValueError, match="timezone-aware"):
        TagTimeTrigger(pendulum.naive(2026, 11, 12))
    with pytest.raises(ValueError, match="paimon_conn_id and table"):
        TagTimeTrigger(utc(2026, 11, 12), data_after=utc(2026, 11, 12))


def test_tag_time_trigger_fires_at_once_when_past():
    event = first_event(TagTimeTrigger(utc(2020, 1, 1)))
    assert event.payload == {"status": "success", "moment": utc(2020, 1, 1).isoformat(), "snapshot_id": None}


def test_tag_time_trigger_waits_for_the_moment():
    moment = pendulum.now("UTC").add(seconds=1.5)
    started = time.monotonic()
    event = first_event(TagTimeTrigger(moment))
    assert time.monotonic() - started >= 1.2
    assert pendulum.now("UTC") >= moment
    assert event.payload["status"] == "success"


def test_tag_time_trigger_waits_for_data_in_a_thread(warehouse):
    t = create_table(warehouse, "db.live", {})
    commit_now(t, 1)
    data_after = pendulum.now("UTC").add(seconds=1)
    trigger = TagTimeTrigger(pendulum.now("UTC"), paimon_conn_id="paimon_default", table="db.live",
                             data_after=data_after, poll_interval=0.2)
    async def go():
        task = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(0.6)
        assert not task.done()  # the only snapshot is older than data_after
        # The event loop keeps running while the trigger polls (its table reads run in threads).
        await asyncio.sleep(0.6)
        await asyncio.to_thread(commit_now, t, 2)
        return await asyncio.wait_for(task, 10)

    event = asyncio.run(go())
    assert event.payload["status"] == "success"
    assert event.payload["snapshot_id"] == 2


def test_tag_time_trigger_reports_errors(warehouse):
    trigger = TagTimeTrigger(utc(2020, 1, 1), paimon_conn_id="paimon_default", table="db.missing",
                             data_after=utc(2020, 1, 1), poll_interval=0.1)
    event = first_event(trigger)
    assert event.payload["status"] == "error"
    assert "db.missing" in event.payload["message"]


def test_tag_exists_trigger_fires_when_the_tag_appears(warehouse):
    trigger = TagExistsTrigger(paimon_conn_id="paimon_default", table="db.later", tag_name="2026-11-11",
                               poll_interval=0.1)

    async def go():
        task = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(0.4)
        assert not task.done()  # no table yet
        t = await asyncio.to_thread(create_table, warehouse, "db.later", {})
        await asyncio.to_thread(commit_now, t, 1)
        await asyncio.sleep(0.3)
        assert not task.done()  # a table, but no tag
        await asyncio.to_thread(t.tags.create, "2026-11-11")
        return await asyncio.wait_for(task, 10)

    event = asyncio.run(go())
    assert event.payload == {"status": "success", "tag": "2026-11-11", "snapshot_id": 1}


def test_tag_exists_trigger_reports_a_missing_connection(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_NOPE", raising=False)
    event = first_event(TagExistsTrigger(paimon_conn_id="nope", table="db.t", tag_name="x", poll_interval=0.1))
    assert event.payload["status"] == "error"
    assert "nope" in event.payload["message"]


# ---------------------------------------------------------------------------------------------------------
# TagTimeSensor
# ---------------------------------------------------------------------------------------------------------


def test_tag_time_sensor_pokes_until_due(table, now):
    sensor = TagTimeSensor(task_id="wait", table="db.orders")
    ctx = daily(utc(2026, 11, 12))
    now(utc(2026, 11, 12, 2, 29, 59))
    assert not sensor.poke(ctx)
    now(utc(2026, 11, 12, 2, 30))
    result = sensor.poke(ctx)
    assert result.is_done
    assert result.xcom_value == {
        "table": "db.orders",
        "tag": "2026-11-11",
        "period_start": utc(2026, 11, 11).isoformat(),
        "period_end": utc(2026, 11, 12).isoformat(),
        "due": utc(2026, 11, 12, 2, 30).isoformat(),
    }


def test_tag_time_sensor_passes_at_once_for_past_periods(table, now):
    sensor = TagTimeSensor(task_id="wait", table="db.orders", timeout=0, poke_interval=0)
    started = time.monotonic()
    assert sensor.execute(daily(utc(2026, 11, 12)))["tag"] == "2026-11-11"
    assert time.monotonic() - started < 5


def test_tag_time_sensor_waits_for_data(table, now):
    sensor = TagTimeSensor(task_id="wait", table="db.orders", wait_for_data=True)
    ctx = daily(utc(2026, 11, 12))
    assert not sensor.poke(ctx)  # due, but the latest snapshot (23:00) is before the period's end
    commit_at(table, utc(2026, 11, 12, 0, 0, 0), 3)
    assert sensor.poke(ctx)


def test_tag_time_sensor_defers_until_due(table, now):
    now(utc(2026, 11, 12, 1))
    sensor = TagTimeSensor(task_id="wait", table="db.orders", deferrable=True, wait_for_data=True, timeout=600,
                           poke_interval=30)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(daily(utc(2026, 11, 12)))
    trigger = deferred.value.trigger
    assert isinstance(trigger, TagTimeTrigger)
    assert trigger.moment == utc(2026, 11, 12, 2, 30)
    assert trigger.data_after == utc(2026, 11, 12)
    assert (trigger.table, trigger.paimon_conn_id, trigger.poll_interval) == ("db.orders", "paimon_default", 30)
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == pendulum.duration(seconds=600)
    plan = deferred.value.kwargs["plan"]
    assert plan["tag"] == "2026-11-11"

    event = {"status": "success", "moment": utc(2026, 11, 12, 2, 30).isoformat(), "snapshot_id": 3}
    assert sensor.execute_complete({}, event=event, plan=plan) == plan
    with pytest.raises(AirflowException, match="boom"):
        sensor.execute_complete({}, event={"status": "error", "message": "boom"}, plan=plan)


def test_deferrable_tag_time_sensor_does_not_defer_when_past(table, now):
    sensor = TagTimeSensor(task_id="wait", table="db.orders", deferrable=True)
    assert sensor.execute(daily(utc(2026, 11, 12)))["tag"] == "2026-11-11"


def test_tag_time_sensor_pokes_until_a_missing_table_exists(warehouse, now):
    # Like TagSensor, it waits for a table that is created later (the first run of a new pipeline).
    sensor = TagTimeSensor(task_id="wait", table="db.later")
    ctx = daily(utc(2026, 11, 12))
    assert not sensor.poke(ctx)
    assert not sensor.poke(ctx)
    create_table(warehouse, "db.later", {"tag.create-time": "02:30"})
    result = sensor.poke(ctx)
    assert result.is_done and result.xcom_value["tag"] == "2026-11-11"


def test_deferrable_tag_time_sensor_waits_for_a_missing_table(warehouse, now):
    sensor = TagTimeSensor(task_id="wait", table="db.later", deferrable=True, wait_for_data=True,
                           poke_interval=0.1)
    ctx = daily(utc(2026, 11, 12))
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(ctx)
    trigger = round_trip(deferred.value.trigger)
    assert trigger.moment is None and trigger.wait_for_data
    assert trigger.run_times["logical_date"] == utc(2026, 11, 12).isoformat()

    async def go():
        task = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(0.5)
        assert not task.done()  # no table yet
        t = await asyncio.to_thread(create_table, warehouse, "db.later", {"tag.create-time": "02:30"})
        await asyncio.sleep(0.5)
        assert not task.done()  # the table, due long ago, but no snapshot at or after the period's end
        await asyncio.to_thread(commit_at, t, utc(2026, 11, 12, 1), 1)
        return await asyncio.wait_for(task, 10)

    event = asyncio.run(go())
    assert event.payload["status"] == "success" and event.payload["snapshot_id"] == 1
    plan = event.payload["plan"]
    assert (plan["tag"], plan["due"]) == ("2026-11-11", utc(2026, 11, 12, 2, 30).isoformat())
    assert sensor.execute_complete({}, event=event.payload) == plan


def test_tag_time_sensor_follows_the_table_calendar(warehouse, now):
    create_table(warehouse, "db.two", {"tag.create-interval": "2d", "tag.create-time": "02:30",
                                       "sink.process-time-zone": "Europe/Berlin"})
    sensor = TagTimeSensor(task_id="wait", table="db.two")
    # Data interval of a 2-day TagPeriodTimetable run (Berlin): 2026-11-11 00:00 to 2026-11-13 00:00.
    start = pendulum.datetime(2026, 11, 11, tz="Europe/Berlin")
    ctx = {"data_interval_start": start, "data_interval_end": start.add(days=2), "logical_date": start,
           "dag_run": None}
    plan = sensor.poke(ctx).xcom_value
    assert plan["tag"] == "2026-11-11"
    assert plan["due"] == pendulum.datetime(2026, 11, 13, 2, 30, tz="Europe/Berlin").in_timezone("UTC").isoformat()


# ---------------------------------------------------------------------------------------------------------
# TagSensor
# ---------------------------------------------------------------------------------------------------------


def test_tag_sensor(table):
    sensor = TagSensor(task_id="t", table="db.orders", tag_name="2026-11-11")
    assert not sensor.poke({})
    table.tags.create("2026-11-11", snapshot_id=1)
    done = sensor.poke({})
    assert done.is_done and done.xcom_value == {"tag": "2026-11-11", "snapshot_id": 1}


def test_tag_sensor_waits_for_a_table_that_does_not_exist_yet(warehouse):
    assert not TagSensor(task_id="t", table="db.future", tag_name="x").poke({})


def test_deferrable_tag_sensor(table):
    sensor = TagSensor(task_id="t", table="db.orders", tag_name="2026-11-11", deferrable=True, poke_interval=7)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, TagExistsTrigger)
    assert (trigger.table, trigger.tag_name, trigger.poll_interval) == ("db.orders", "2026-11-11", 7)
    event = {"status": "success", "tag": "2026-11-11", "snapshot_id": 2}
    assert sensor.execute_complete({}, event=event) == {"tag": "2026-11-11", "snapshot_id": 2}

    table.tags.create("2026-11-11", snapshot_id=2)
    assert sensor.execute({}) == {"tag": "2026-11-11", "snapshot_id": 2}


def test_sensor_templated_fields():
    assert {"table", "paimon_conn_id"} <= set(TagTimeSensor.template_fields)
    assert {"table", "paimon_conn_id", "tag_name"} <= set(TagSensor.template_fields)
