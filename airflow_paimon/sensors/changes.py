"""ChangesSensor: wait until a table has changes after a consumer's position, a tag or a snapshot.

What counts as a change is the trigger's rule (``airflow_paimon.triggers.changes``): a snapshot from which the
change feed can return rows. The sensor returns the range of those changes, ready for
:class:`~airflow_paimon.operators.changes.ExportChangesOperator` or ``table.changes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import PokeReturnValue

from airflow_paimon import arguments as args
from airflow_paimon.format.consumers import check_consumer_id
from airflow_paimon.format.errors import InvalidOptionError, PaimonError
from airflow_paimon.hooks.paimon import PaimonHook
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.sensors.tags import PaimonSensor
from airflow_paimon.triggers.changes import ChangesTrigger, changed_snapshots, event_payload

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["ChangesSensor"]


class ChangesSensor(PaimonSensor):
    """Wait until ``table`` has changes after a position: exactly one of ``consumer_id``, ``after_tag`` and
    ``after_snapshot``.

    :param table: ``database.table`` (templated).
    :param consumer_id: wait for changes the consumer has not read: snapshots at or after its next snapshot
        (templated). The sensor does not move the consumer.
    :param after_tag: wait for changes after the tag's snapshot (templated).
    :param after_snapshot: wait for changes after this snapshot id, 0 for any change (templated).
    :param deferrable: wait in the triggerer (:class:`~airflow_paimon.triggers.changes.ChangesTrigger`) instead
        of a worker slot; default ``[operators] default_deferrable``.
    :param paimon_conn_id: the Paimon connection (templated).

    The position is read when the task starts (a consumer that moves while the sensor waits is not followed).
    Returns ``{"table", "start_snapshot", "end_snapshot", "snapshots", "commit_kinds", "end_commit_time"}``: the
    changes' range ``(start_snapshot, end_snapshot]`` and the changed snapshots in it.

    Checked when the DAG is parsed: ``table``; exactly one position; ``consumer_id`` (Paimon's file-name rule),
    ``after_tag`` (a tag name), ``after_snapshot`` (a whole number >= 0); ``deferrable``; templated ones once
    rendered. A consumer or tag that does not exist fails the task without retries.
    """

    template_fields: Sequence[str] = ("table", "paimon_conn_id", "consumer_id", "after_tag", "after_snapshot")

    def __init__(
        self,
        *,
        table: str,
        consumer_id: str | None = None,
        after_tag: str | None = None,
        after_snapshot: int | str | None = None,
        deferrable: bool | None = None,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, deferrable=deferrable, **kwargs)
        self.consumer_id = consumer_id
        self.after_tag = after_tag
        self.after_snapshot = after_snapshot
        self._after: int | None = None
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        positions = (("consumer_id", self.consumer_id), ("after_tag", self.after_tag),
                     ("after_snapshot", self.after_snapshot))
        given = [name for name, value in positions if checkable(value, rendered)]
        pending = [name for name, value in positions if value is not None and not rendered and args.is_template(value)]
        if len(given) > 1 or not (given or pending):
            what = " and ".join(given) if given else "none of them"
            raise args.ArgumentError(f"consumer_id, after_tag and after_snapshot: give exactly one position to wait "
                                     f"for changes after, got {what}")
        if checkable(self.consumer_id, rendered):
            try:
                check_consumer_id(self.consumer_id)
            except InvalidOptionError as exc:
                raise args.ArgumentError(f"consumer_id: {exc}") from None
        if checkable(self.after_tag, rendered):
            args.tag_name(self.after_tag, "after_tag")
        if checkable(self.after_snapshot, rendered):
            args.whole_number(self.after_snapshot, "after_snapshot", minimum=0)

    def _position(self) -> int:
        """The exclusive snapshot id after which changes count."""
        try:
            table = self.hook.get_table(self.table)
            if self.consumer_id is not None and checkable(self.consumer_id, True):
                return table.consumers.require(self.consumer_id) - 1
            if self.after_tag is not None and checkable(self.after_tag, True):
                return table.tags.get(self.after_tag).snapshot.id
        except PaimonError as exc:
            raise task_failure(exc) from exc
        return args.whole_number(self.after_snapshot, "after_snapshot", minimum=0)

    def _changes(self, after: int) -> dict[str, Any] | None:
        try:
            changed = changed_snapshots(self.hook.get_table(self.table), after)
        except PaimonError as exc:
            raise task_failure(exc) from exc
        if not changed:
            self.log.info("No changes of %s after snapshot %d yet", self.table, after)
            return None
        found = event_payload(self.table, after, changed)
        del found["status"]
        self.log.info("%s changed after snapshot %d: snapshots %s", self.table, after, found["snapshots"])
        return found

    def poke(self, context: Context) -> PokeReturnValue:
        if self._after is None:
            self._after = self._position()
        found = self._changes(self._after)
        return PokeReturnValue(found is not None, found)

    def execute(self, context: Context) -> Any:
        self._after = None
        if not self.deferrable:
            return super().execute(context)
        after = self._position()
        found = self._changes(after)
        if found is not None:
            return found
        self.defer(
            trigger=ChangesTrigger(paimon_conn_id=self.paimon_conn_id, table=self.table, after_snapshot=after,
                                   poll_interval=self.poke_interval),
            method_name="execute_complete",
            timeout=self._defer_timeout(),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        found = dict(self._check_event(event))
        del found["status"]
        self.log.info("%s changed after snapshot %s: snapshots %s", self.table, found["start_snapshot"],
                      found["snapshots"])
        return found
