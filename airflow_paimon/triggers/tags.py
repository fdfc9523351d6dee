"""Deferrable waits of the tag sensors, run by the triggerer.

Nothing here blocks the triggerer's event loop: time is waited with ``asyncio.sleep``, and every look at a
table (which needs the Airflow connection and filesystem I/O) runs in a worker thread with
``asyncio.to_thread``. The triggers carry only the connection id, never the warehouse's credentials: the
connection is resolved inside that thread (the task SDK bridges a thread's connection request to the
triggerer's event loop).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pendulum
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_paimon import clock

__all__ = ["TagExistsTrigger", "TagTimeTrigger", "period_plan"]

_MAX_SLEEP = 60.0
"""Sleep at most this long before reading the clock again (robust to clock changes and suspends)."""


def _as_utc(given: dt.datetime | str, what: str) -> pendulum.DateTime:
    value = pendulum.parse(given) if isinstance(given, str) else given
    if not isinstance(value, dt.datetime):
        raise TypeError(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware, got {value.isoformat()}")
    return pendulum.instance(value).in_timezone("UTC")


def _open_table(paimon_conn_id: str, table: str) -> Any:
    from airflow_paimon.hooks.paimon import PaimonHook

    return PaimonHook(paimon_conn_id=paimon_conn_id).get_table(table)


def data_snapshot(paimon_conn_id: str, table: str, period_end: dt.datetime) -> int | None:
    """``periodic_tags.data_snapshot``: the latest snapshot's id once one was committed at or after
    ``period_end``, else None. Blocking: call it in a thread."""
    from airflow_paimon.format import periodic_tags

    return periodic_tags.data_snapshot(_open_table(paimon_conn_id, table), period_end)


def period_plan(paimon_conn_id: str, table: str, run_times: dict[str, str | None]) -> dict[str, Any] | None:
    """The run's periodic tag, its period and when it is due (``{"table", "tag", "period_start", "period_end",
    "due"}``, ISO times: ``periodic_tags.TagPlan.to_dict``), from the table's options; None while the table does
    not exist. Blocking: call it in a thread."""
    from airflow_paimon.format import periodic_tags
    from airflow_paimon.format.errors import TableNotFoundError

    try:
        opened = _open_table(paimon_conn_id, table)
    except TableNotFoundError:
        return None
    return periodic_tags.plan(opened, periodic_tags.RunTimes.from_iso(run_times)).to_dict()


def tag_info(paimon_conn_id: str, table: str, tag_name: str) -> dict[str, Any] | None:
    """``{"tag", "snapshot_id"}`` when the tag exists, else None (also while the table does not exist).
    Blocking: call it in a thread."""
    from airflow_paimon.format.errors import TableNotFoundError, TagNotFoundError

    try:
        tag = _open_table(paimon_conn_id, table).tags.get(tag_name)
    except (TableNotFoundError, TagNotFoundError):
        return None
    return {"tag": tag_name, "snapshot_id": tag.snapshot.id}


async def _sleep_until(moment: pendulum.DateTime) -> None:
    while True:
        remaining = (moment - clock.utcnow()).total_seconds()
        if remaining <= 0:
            return
        await asyncio.sleep(min(remaining, _MAX_SLEEP))


class TagTimeTrigger(BaseTrigger):
    """Fires at ``moment`` (a tag's creation instant); with ``data_after``, only once the table also has a
    snapshot committed at or after ``data_after`` (the period's end: its data is complete).

    Without ``moment`` (the table did not exist when the sensor deferred, so its tag options were unknown) it
    first waits for the table, then finds the run's period from ``run_times`` and the table's options
    (:func:`period_plan`), and waits for that period's creation instant (and, with ``wait_for_data``, for a
    snapshot committed at or after the period's end).

    :param moment: when the tag is due (timezone-aware), or None (see above).
    :param paimon_conn_id: the Paimon connection (needed with ``data_after`` or without ``moment``).
    :param table: ``database.table`` (needed with ``data_after`` or without ``moment``).
    :param data_after: wait for a snapshot committed at or after this instant.
    :param run_times: the run's ``data_interval_start``, ``data_interval_end``, ``logical_date`` and
        ``run_after`` (ISO strings or None); needed without ``moment``.
    :param wait_for_data: without ``moment``: also wait for a snapshot at or after the period's end.
    :param poll_interval: seconds between looks at the table.

    The event is ``{"status": "success", "moment", "snapshot_id", "plan"}`` (``plan``: :func:`period_plan`'s,
    when it was computed here) or ``{"status": "error", "message"}``.
    """

    def __init__(
        self,
        moment: dt.datetime | str | None,
        *,
        paimon_conn_id: str | None = None,
        table: str | None = None,
        data_after: dt.datetime | str | None = None,
        run_times: dict[str, str | None] | None = None,
        wait_for_data: bool = False,
        poll_interval: float = 60.0,
    ) -> None:
        super().__init__()
        self.moment = _as_utc(moment, "moment") if moment is not None else None
        self.data_after = _as_utc(data_after, "data_after") if data_after is not None else None
        if (self.data_after is not None or self.moment is None) and not (paimon_conn_id and table):
            raise ValueError("waiting for data or for the table needs paimon_conn_id and table")
        if self.moment is None and run_times is None:
            raise ValueError("without moment, the run's run_times are needed to find its period")
        self.paimon_conn_id = paimon_conn_id
        self.table = table
        self.run_times = dict(run_times) if run_times is not None else None
        self.wait_for_data = bool(wait_for_data)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "moment": self.moment,
                "paimon_conn_id": self.paimon_conn_id,
                "table": self.table,
                "data_after": self.data_after,
                "run_times": self.run_times,
                "wait_for_data": self.wait_for_data,
                "poll_interval": self.poll_interval,
            },
        )

    def _where(self) -> tuple[str, str]:
        """The connection id and table, which the constructor requires whenever the trigger looks at the table."""
        if not (self.paimon_conn_id and self.table):
            raise ValueError("waiting for data or for the table needs paimon_conn_id and table")
        return self.paimon_conn_id, self.table

    async def run(self) -> AsyncIterator[TriggerEvent]:
        moment, data_after, plan = self.moment, self.data_after, None
        if moment is None:
            self.log.info("Waiting for the table %s to exist", self.table)
            while plan is None:
                try:
                    plan = await asyncio.to_thread(period_plan, *self._where(), self.run_times or {})
                except Exception as exc:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                if plan is None:
                    await asyncio.sleep(self.poll_interval)
            self.log.info("The table %s exists: tag %r is due at %s", self.table, plan["tag"], plan["due"])
            moment = _as_utc(plan["due"], "due")
            if self.wait_for_data:
                data_after = _as_utc(plan["period_end"], "period_end")
        self.log.info("Waiting until %s", moment.isoformat())
        await _sleep_until(moment)
        snapshot_id = None
        if data_after is not None:
            self.log.info("Waiting for a snapshot of %s committed at or after %s", self.table, data_after)
            while True:
                try:
                    snapshot_id = await asyncio.to_thread(data_snapshot, *self._where(), data_after)
                except Exception as exc:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                if snapshot_id is not None:
                    break
                await asyncio.sleep(self.poll_interval)
        payload: dict[str, Any] = {"status": "success", "moment": moment.isoformat(), "snapshot_id": snapshot_id}
        if plan is not None:
            payload["plan"] = plan
        yield TriggerEvent(payload)


class TagExistsTrigger(BaseTrigger):
    """Fires once the table has the tag ``tag_name`` (a missing table counts as "not yet").

    :param paimon_conn_id: the Paimon connection.
    :param table: ``database.table``.
    :param tag_name: the tag to wait for.
    :param poll_interval: seconds between looks at the table.

    The event is ``{"status": "success", "tag", "snapshot_id"}`` or ``{"status": "error", "message"}``.
    """

    def __init__(self, *, paimon_conn_id: str, table: str, tag_name: str, poll_interval: float = 60.0) -> None:
        super().__init__()
        self.paimon_conn_id = paimon_conn_id
        self.table = table
        self.tag_name = tag_name
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "paimon_conn_id": self.paimon_conn_id,
                "table": self.table,
                "tag_name": self.tag_name,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info("Waiting for tag %r of %s", self.tag_name, self.table)
        while True:
            try:
                found = await asyncio.to_thread(tag_info, self.paimon_conn_id, self.table, self.tag_name)
            except Exception as exc:
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            if found is not None:
                yield TriggerEvent({"status": "success", **found})
                return
            await asyncio.sleep(self.poll_interval)
