"""Sensors for periodic tags: wait until a run's tag is due, or until a tag exists.

* :class:`TagTimeSensor` goes before :class:`~airflow_paimon.operators.tags.CreateTagOperator`: it waits until
  the run's period tag is due (period end + ``tag.create-time``, from the table's options) and, with
  ``wait_for_data``, until the table has a snapshot committed at or after the period's end. A backfill of past
  periods passes at once.
* :class:`TagSensor` is for downstream DAGs: it waits until a tag exists.

Both can defer (``deferrable=True``) to the triggers of ``airflow_paimon.triggers.tags``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException

from airflow_paimon import arguments as args
from airflow_paimon import clock
from airflow_paimon.format import periodic_tags
from airflow_paimon.format.errors import PaimonError, TableNotFoundError
from airflow_paimon.hooks.paimon import PaimonHook
from airflow_paimon.operators.checked import CheckedArguments, checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.runs import plan_run, run_times
from airflow_paimon.triggers.tags import TagExistsTrigger, TagTimeTrigger, tag_info

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["PaimonSensor", "TagSensor", "TagTimeSensor"]


def _default_deferrable() -> bool:
    return conf.getboolean("operators", "default_deferrable", fallback=False)


class PaimonSensor(CheckedArguments, BaseSensorOperator):
    """Base of the sensors that wait on one table: its arguments, the hook, and the checks of a trigger's
    event."""

    template_fields: Sequence[str] = ("table", "paimon_conn_id")
    ui_color = "#d5e8f8"

    def __init__(
        self,
        *,
        table: str,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.paimon_conn_id = paimon_conn_id
        self.deferrable = _default_deferrable() if deferrable is None else deferrable

    def check_arguments(self, rendered: bool) -> None:
        if checkable(self.table, rendered) or self.table is None:
            args.table_identifier(self.table)
        args.flag(self.deferrable, "deferrable")

    @cached_property
    def hook(self) -> PaimonHook:
        return PaimonHook(paimon_conn_id=self.paimon_conn_id)

    def _defer_timeout(self) -> dt.timedelta | None:
        return dt.timedelta(seconds=self.timeout) if self.timeout else None

    @staticmethod
    def _check_event(event: dict[str, Any] | None) -> dict[str, Any]:
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "the trigger ended without an event")
            raise AirflowException(f"waiting failed: {message}")
        return event


class TagTimeSensor(PaimonSensor):
    """Wait until the run's periodic tag is due: its period's end + ``tag.create-time``.

    The run's period is the one :class:`~airflow_paimon.operators.tags.CreateTagOperator` tags. When the
    instant has passed (a backfill of old periods) the sensor succeeds at once. While the table does not exist
    yet, the sensor waits for it (its tag options say when the tag is due), in both modes.

    :param table: ``database.table`` (templated).
    :param wait_for_data: also wait until the table has a snapshot committed at or after the period's end.
    :param deferrable: wait in the triggerer (:class:`~airflow_paimon.triggers.tags.TagTimeTrigger`) instead
        of a worker slot; default ``[operators] default_deferrable``.
    :param paimon_conn_id: the Paimon connection (templated).

    Other arguments are :class:`~airflow.sdk.BaseSensorOperator`'s (``poke_interval``, ``timeout``, ``mode``,
    ...). Returns ``{"table", "tag", "period_start", "period_end", "due"}``.

    Checked when the DAG is parsed: ``table``, ``wait_for_data`` and ``deferrable`` (True or False).
    """

    def __init__(
        self,
        *,
        table: str,
        wait_for_data: bool = False,
        deferrable: bool | None = None,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, deferrable=deferrable, **kwargs)
        self.wait_for_data = wait_for_data
        self._plan: periodic_tags.TagPlan | None = None
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        args.flag(self.wait_for_data, "wait_for_data")

    def _period_plan(self, context: Context) -> periodic_tags.TagPlan | None:
        """The run's tag, period and due instant (reads the table's options once per task try), seen at the
        clock's now; None while the table does not exist."""
        if self._plan is None:
            try:
                table = self.hook.get_table(self.table)
            except TableNotFoundError:
                self.log.info("The table %s does not exist yet", self.table)
                return None
            except PaimonError as exc:
                raise task_failure(exc) from exc
            try:
                plan = plan_run(table, context)
            except (PaimonError, ValueError) as exc:
                raise task_failure(exc) from exc
            self._plan = plan
            shown = plan.to_dict()
            self.log.info(
                "Tag %r of %s (period [%s, %s)) is due at %s%s",
                plan.name, plan.table, shown["period_start"], shown["period_end"], shown["due"],
                " once the period's data is complete" if self.wait_for_data else "",
            )
            return plan
        return self._plan.at()

    def _data_complete(self, plan: periodic_tags.TagPlan) -> bool:
        if periodic_tags.data_snapshot(self.hook.get_table(self.table), plan.period.end) is not None:
            return True
        self.log.info("No snapshot of %s committed at or after %s yet", plan.table, plan.to_dict()["period_end"])
        return False

    def poke(self, context: Context) -> PokeReturnValue:
        plan = self._period_plan(context)
        if plan is None or not plan.is_due:
            return PokeReturnValue(False)
        if self.wait_for_data and not self._data_complete(plan):
            return PokeReturnValue(False)
        return PokeReturnValue(True, plan.to_dict())

    def execute(self, context: Context) -> Any:
        self._plan = None
        if not self.deferrable:
            return super().execute(context)
        plan = self._period_plan(context)
        if plan is None:
            self.defer(
                trigger=TagTimeTrigger(
                    moment=None,
                    paimon_conn_id=self.paimon_conn_id,
                    table=self.table,
                    run_times=run_times(context).to_iso(),
                    wait_for_data=self.wait_for_data,
                    poll_interval=self.poke_interval,
                ),
                method_name="execute_complete",
                timeout=self._defer_timeout(),
            )
        if plan.is_due and (not self.wait_for_data or self._data_complete(plan)):
            return plan.to_dict()
        self.defer(
            trigger=TagTimeTrigger(
                moment=plan.due,
                paimon_conn_id=self.paimon_conn_id,
                table=self.table,
                data_after=plan.period.end if self.wait_for_data else None,
                poll_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            kwargs={"plan": plan.to_dict()},
            timeout=self._defer_timeout(),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None,
                         plan: dict[str, Any] | None = None) -> dict[str, Any]:
        event = self._check_event(event)
        plan = plan or event.get("plan")
        if not plan:
            # Resumed without the kwargs given to defer() (dag.test() passes only the event): recompute.
            self._plan = None
            recomputed = self._period_plan(context)
            if recomputed is None:
                raise AirflowException(f"the table {self.table} no longer exists")
            plan = recomputed.to_dict()
        self.log.info("Tag %r is due (trigger fired at %s)", plan.get("tag"), periodic_tags.iso_utc(clock.utcnow()))
        return dict(plan)


class TagSensor(PaimonSensor):
    """Wait until a table has the tag ``tag_name`` (a table that does not exist yet has no tags).

    :param table: ``database.table`` (templated).
    :param tag_name: the tag (templated), e.g. ``"{{ data_interval_start | ds }}"``.
    :param deferrable: wait in the triggerer (:class:`~airflow_paimon.triggers.tags.TagExistsTrigger`).
    :param paimon_conn_id: the Paimon connection (templated).

    Returns ``{"tag", "snapshot_id"}``. Checked when the DAG is parsed: ``table``, ``tag_name``, ``deferrable``.
    """

    template_fields: Sequence[str] = ("table", "paimon_conn_id", "tag_name")

    def __init__(
        self,
        *,
        table: str,
        tag_name: str,
        deferrable: bool | None = None,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, deferrable=deferrable, **kwargs)
        self.tag_name = tag_name
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.tag_name, rendered) or self.tag_name is None:
            args.tag_name(self.tag_name)

    def _find(self) -> dict[str, Any] | None:
        try:
            found = tag_info(self.paimon_conn_id, self.table, self.tag_name)
        except TableNotFoundError:
            found = None
        except PaimonError as exc:
            raise task_failure(exc) from exc
        if found is None:
            self.log.info("Tag %r of %s does not exist yet", self.tag_name, self.table)
        return found

    def poke(self, context: Context) -> PokeReturnValue:
        found = self._find()
        return PokeReturnValue(found is not None, found)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        found = self._find()
        if found is not None:
            return found
        self.defer(
            trigger=TagExistsTrigger(
                paimon_conn_id=self.paimon_conn_id,
                table=self.table,
                tag_name=self.tag_name,
                poll_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=self._defer_timeout(),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        event = self._check_event(event)
        return {"tag": event["tag"], "snapshot_id": event["snapshot_id"]}
