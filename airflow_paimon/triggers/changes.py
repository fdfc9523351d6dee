"""Waiting for a table's changes: the trigger of ``ChangesSensor`` and of asset watchers.

A snapshot *has changes* when the change feed (``table.changes``) can return rows from it: an APPEND or OVERWRITE
commit, or any commit that carries changelog (a ``lookup`` or ``full-compaction`` producer writes its changelog in
COMPACT snapshots). A COMPACT snapshot without changelog rewrites files but changes no row, so it does not count.

:class:`ChangesTrigger` serves both uses. Deferred from :class:`~airflow_paimon.sensors.changes.ChangesSensor`, its
first event resumes the task. In ``Asset(..., watchers=[AssetWatcher(name, trigger=ChangesTrigger(...))])`` it runs
for as long as the asset is watched, keeps its cursor in the asset's state store (Airflow 3.3's
``asset_state_store``) and fires one event per look that finds changes; a restart of the triggerer starts from the
stored cursor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

if TYPE_CHECKING:
    from airflow_paimon.format import Table

__all__ = ["CURSOR_KEY", "ChangesTrigger", "changed_snapshots", "changes_since"]

CURSOR_KEY = "paimon_changes_after_snapshot"
"""The asset state store's key of a watcher's cursor: the last snapshot id its events covered."""

_SAVE_DELAY = 3.0
"""Seconds between an event and saving the cursor past it. The triggerer hands events to its supervisor about
once a second, so by then the event is recorded: a restart in between re-emits the event rather than lose it."""

_UNCHANGED_KINDS = frozenset({"COMPACT", "ANALYZE"})


def changed_snapshots(table: Table, after: int) -> list[dict[str, Any]]:
    """The retained snapshots after ``after`` (exclusive) whose commit has changes (see the module docstring),
    oldest first, as ``{"snapshot_id", "commit_kind", "commit_time"}`` (epoch milliseconds)."""
    from airflow_paimon.format.errors import SnapshotNotFoundError

    manager = table.snapshot_manager
    latest = manager.latest_id()
    if latest is None or latest <= after:
        return []
    earliest = manager.earliest_id() or 1
    found = []
    for snapshot_id in range(max(after + 1, earliest), latest + 1):
        try:
            snapshot = manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            continue  # expired while being listed
        if snapshot.commit_kind in _UNCHANGED_KINDS and not snapshot.changelog_record_count:
            continue
        found.append({"snapshot_id": snapshot.id, "commit_kind": snapshot.commit_kind,
                      "commit_time": snapshot.time_millis})
    return found


def changes_since(paimon_conn_id: str, table: str, after: int | None) -> tuple[int, list[dict[str, Any]]]:
    """``(after, changed_snapshots(after))`` of a table; ``after=None`` means its latest snapshot now (0 while
    the table is empty or does not exist). A table that does not exist has no changes. Blocking: call it in a
    thread."""
    from airflow_paimon.format.errors import TableNotFoundError
    from airflow_paimon.hooks.paimon import PaimonHook

    try:
        opened = PaimonHook(paimon_conn_id=paimon_conn_id).get_table(table)
    except TableNotFoundError:
        return (0 if after is None else after), []
    if after is None:
        return opened.snapshot_manager.latest_id() or 0, []
    return after, changed_snapshots(opened, after)


def event_payload(table: str, after: int, changed: list[dict[str, Any]]) -> dict[str, Any]:
    """What an event of :class:`ChangesTrigger` holds (an asset watcher's event reaches tasks as
    ``extra["payload"]``): the change feed's range ``(start_snapshot, end_snapshot]`` and its changed snapshots."""
    return {
        "status": "success",
        "table": table,
        "start_snapshot": after,
        "end_snapshot": changed[-1]["snapshot_id"],
        "snapshots": [entry["snapshot_id"] for entry in changed],
        "commit_kinds": [entry["commit_kind"] for entry in changed],
        "end_commit_time": changed[-1]["commit_time"],
    }


class ChangesTrigger(BaseEventTrigger):
    """Fires when ``table`` has snapshots with changes after the snapshot ``after_snapshot``.

    :param paimon_conn_id: the Paimon connection.
    :param table: ``database.table``.
    :param after_snapshot: the exclusive start: changes in later snapshots fire. None: the latest snapshot when
        the trigger first runs (a watcher stores that position at once, so a restart keeps it).
    :param poll_interval: seconds between looks at the table.

    Each event covers every changed snapshot since the previous one: ``{"status": "success", "table",
    "start_snapshot", "end_snapshot", "snapshots", "commit_kinds", "end_commit_time"}``. ``start_snapshot``
    (exclusive) and ``end_snapshot`` (inclusive) are the change feed's range, so ``table.changes(start, end)``
    or ``ExportChangesOperator(start=..., end=...)`` read exactly the event's changes; the next event starts where
    this one ended. Deferred from a sensor, a failure to read the table is the event ``{"status": "error",
    "message"}``; as a watcher it is logged and the table is read again at the next look.
    """

    def __init__(self, *, paimon_conn_id: str, table: str, after_snapshot: int | None = None,
                 poll_interval: float = 60.0) -> None:
        super().__init__()
        if after_snapshot is not None and (isinstance(after_snapshot, bool) or not isinstance(after_snapshot, int)
                                           or after_snapshot < 0):
            raise ValueError(f"after_snapshot: expected a snapshot id >= 0 or None, not {after_snapshot!r}")
        if not float(poll_interval) > 0:
            raise ValueError(f"poll_interval: expected a positive number of seconds, not {poll_interval!r}")
        self.paimon_conn_id = paimon_conn_id
        self.table = table
        self.after_snapshot = after_snapshot
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "paimon_conn_id": self.paimon_conn_id,
                "table": self.table,
                "after_snapshot": self.after_snapshot,
                "poll_interval": self.poll_interval,
            },
        )

    async def _stored_cursor(self) -> tuple[Any, int | None]:
        """The watched asset's state store and the cursor stored there; the store is None when deferred from a
        task, or when several assets watch the trigger (Airflow then keeps no single cursor, and a restart starts
        again from ``after_snapshot``)."""
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return None, None
        try:
            stored = await store.aget(CURSOR_KEY)
        except ValueError:
            self.log.warning("%s is watched by several assets: its cursor is not kept across triggerer restarts",
                             self.table)
            return None, None
        return store, None if stored is None else int(stored)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watching = getattr(self, "asset_state_store", None) is not None
        store, stored = await self._stored_cursor()
        after = self.after_snapshot if stored is None else stored
        self.log.info("Waiting for changes of %s after snapshot %s", self.table,
                      after if after is not None else "(the latest one)")
        while True:
            try:
                start, changed = await asyncio.to_thread(changes_since, self.paimon_conn_id, self.table, after)
            except Exception as exc:
                if not watching:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                self.log.warning("Reading %s failed (%s: %s); trying again in %.0f s", self.table,
                                 type(exc).__name__, exc, self.poll_interval)
                await asyncio.sleep(self.poll_interval)
                continue
            if after is None:
                after = start
                if store is not None:
                    await store.aset(CURSOR_KEY, after)
            if changed:
                payload = event_payload(self.table, after, changed)
                after = payload["end_snapshot"]
                yield TriggerEvent(payload)
                if store is not None:
                    await asyncio.sleep(min(_SAVE_DELAY, self.poll_interval))
                    await store.aset(CURSOR_KEY, after)
            await asyncio.sleep(self.poll_interval)
