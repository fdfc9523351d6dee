"""Operators for a Paimon table's tags: create (periodic or named) and delete (rollback: operators/rollback.py).

They are thin: each parses its arguments, opens the table with :class:`~airflow_paimon.hooks.paimon.PaimonHook`
and calls the format library (``airflow_paimon.format``), where the rules live.

The periodic tag of a run (see "Periodic tags" in ARCHITECTURE.md): the table's options
(``tag.create-time``, ``tag.create-interval``, ``sink.process-time-zone``, ``tag.period-formatter``, or
Paimon's ``tag.automatic-creation`` options) give its calendar. The run covers

* the period that is its data interval, when the interval is not empty (``TagPeriodTimetable``, or a cron
  timetable with data intervals); an interval that is not exactly one period of the table's calendar fails the
  task at once (the DAG's schedule disagrees with the table's tag options);
* otherwise the last whole period ending at or before its logical date (or ``run_after`` when it has none):
  a ``@daily`` run of Airflow 3 (start == end == logical date 2026-11-12 00:00) tags the period of 2026-11-11.

The tag is named after the period's first day and points at the latest snapshot committed at or before the
period's creation instant (period end + ``tag.create-time``), so a backfill tags what a live run would have. On
a table Paimon auto-tags (``tag.automatic-creation``) it follows Paimon's rule instead (see
``airflow_paimon.format.period_tags``): Paimon's tag is accepted, an idle period is skipped. These rules are the
library's use case ``airflow_paimon.format.periodic_tags`` (plan, choose the snapshot, apply); the operator maps
its answers onto Airflow: waiting is a retryable failure, an idle period a skip, a library error a failure
without retries.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from airflow_paimon import arguments as args
from airflow_paimon.assets import table_asset, table_asset_uri
from airflow_paimon.format import periodic_tags
from airflow_paimon.format.changes import request_from_options
from airflow_paimon.format.errors import PaimonError, TagAlreadyExistsError, TagNotFoundError
from airflow_paimon.format.period_tags import SKIPPED, WAIT
from airflow_paimon.hooks.paimon import PaimonHook
from airflow_paimon.operators.checked import CheckedArguments, checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.lineage import PaimonLineage
from airflow_paimon.operators.runs import plan_run
from airflow_paimon.ui.links import PaimonTableLink

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_paimon.format import Table

__all__ = [
    "DEFAULT_ASSET_ALIAS",
    "CreateTagOperator",
    "DeleteTagOperator",
    "PaimonTableOperator",
    "cleanup_summary",
    "table_asset",
    "table_asset_uri",
]

DEFAULT_ASSET_ALIAS = "paimon_tags"
"""The asset alias CreateTagOperator emits its table's asset event through when no ``asset`` is given."""

# ---------------------------------------------------------------------------------------------------------
# Pure helpers (no Airflow objects)
# ---------------------------------------------------------------------------------------------------------


def cleanup_summary(result: Any) -> dict[str, Any]:
    """A compact, JSON-serialisable summary of a format-library ``CleanupResult`` (for XCom and logs)."""
    data_files = list(getattr(result, "data_files", []) or [])
    changelog_files = list(getattr(result, "changelog_files", []) or [])
    metadata_files = list(getattr(result, "metadata_files", []) or [])
    summary = {
        "operation": getattr(result, "operation", None),
        "dry_run": bool(getattr(result, "dry_run", False)),
        "snapshots": [int(s) for s in getattr(result, "snapshots", []) or []],
        "tags": [str(t) for t in getattr(result, "tags", []) or []],
        "data_files": len(data_files),
        "changelog_files": len(changelog_files),
        "metadata_files": len(metadata_files),
        "files_freed": len(data_files) + len(changelog_files) + len(metadata_files),
        "bytes_freed": int(getattr(result, "bytes_freed", 0) or 0),
    }
    for key in ("rolled_back_to", "restored_snapshot"):
        value = getattr(result, key, None)
        if value is not None:
            summary[key] = int(value)
    text = getattr(result, "summary", None)
    summary["summary"] = text() if callable(text) else None
    return summary


# ---------------------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------------------


class PaimonTableOperator(CheckedArguments, PaimonLineage, BaseOperator):
    """Base of the operators that act on one table of a Paimon connection's warehouse.

    :param table: the table, ``database.table`` (templated).
    :param paimon_conn_id: the Paimon connection (templated); default ``paimon_default``.

    Arguments are checked when the DAG is parsed (templates once rendered, before ``execute``): see
    :mod:`airflow_paimon.operators.checked`.
    """

    template_fields: Sequence[str] = ("table", "paimon_conn_id")
    ui_color = "#d5e8f8"
    operator_extra_links = (PaimonTableLink(),)

    def __init__(self, *, table: str, paimon_conn_id: str = PaimonHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.paimon_conn_id = paimon_conn_id

    def check_arguments(self, rendered: bool) -> None:
        if checkable(self.table, rendered) or self.table is None:
            args.table_identifier(self.table)
        if not rendered and not isinstance(self.paimon_conn_id, str):
            raise args.ArgumentError(f"paimon_conn_id: expected a connection id, not {self.paimon_conn_id!r}")

    @cached_property
    def hook(self) -> PaimonHook:
        return PaimonHook(paimon_conn_id=self.paimon_conn_id)

    def lineage_hook(self) -> PaimonHook:
        return self.hook

    def get_table(self) -> Table:
        try:
            return self.hook.get_table(self.table)
        except PaimonError as exc:
            raise task_failure(exc) from exc


class CreateTagOperator(PaimonTableOperator):
    """Create a tag: by default the periodic tag of the run's period, idempotently.

    With neither ``tag_name`` nor ``snapshot_id``/``as_of``, the tag of the run's period is created (see the
    module docstring): named after the period, on the latest snapshot committed at or before the period's
    creation instant. The task fails, changing nothing, when that instant is still ahead (put a
    :class:`~airflow_paimon.sensors.tags.TagTimeSensor` before it) or when that snapshot has expired. On a
    table Paimon auto-tags, the tag goes where Paimon's ``TagAutoCreation`` puts it; the task is skipped for a
    period Paimon leaves without a tag.

    ``tag_name`` overrides the name, ``snapshot_id`` or ``as_of`` (a point in time) the snapshot; a named tag
    without either points at the latest snapshot.

    :param table: ``database.table`` (templated).
    :param tag_name: the tag's name; default: the run's period tag (templated).
    :param snapshot_id: tag this snapshot (templated).
    :param as_of: tag the latest snapshot committed at or before this time (templated).
    :param time_retained: how long the tag lives, e.g. ``'7d'``; default ``tag.default-time-retained``
        (templated).
    :param if_exists: when the tag already exists: ``verify`` (default) succeeds if it points at the same
        snapshot and fails otherwise; ``replace`` points it at the new snapshot; ``fail`` always fails.
    :param expire_tags: afterwards expire tags beyond ``tag.num-retained-max`` (periodic ones, oldest first)
        and tags whose retention ran out.
    :param asset: the asset to emit the event on; default: the table's asset
        (:func:`~airflow_paimon.assets.paimon_table_asset`, ``paimon://<warehouse>/<database.table>``) through
        the asset alias ``asset_alias``.
    :param asset_alias: the alias that the default asset event goes through.
    :param paimon_conn_id: the Paimon connection (templated).

    Returns (XCom ``return_value``) ``{"tag", "snapshot_id", "status", ...}`` and pushes ``tag_name`` and
    ``snapshot_id`` as XComs of their own. The asset event's ``extra`` holds ``tag``, ``snapshot_id``,
    ``previous_tag`` and ``previous_snapshot_id`` (the nearest earlier periodic tag, as Paimon's
    ``incremental-to-auto-tag`` finds it: the period's changes are ``(previous_tag, tag]``; None for a named
    tag or the first period), ``table``, ``warehouse``, ``status`` (what happened to the tag: ``created``,
    ``unchanged`` or ``replaced``), ``period_start``/``period_end`` (None for a named tag) and ``run_type``
    (``backfill`` for a backfilled period); see "Assets and scheduling" in the documentation.

    Checked when the DAG is parsed: ``table``, ``tag_name`` (not numeric, no path parts), ``snapshot_id``
    (a whole number >= 1), ``as_of`` (a point in time), ``time_retained`` (a positive duration), not both
    ``snapshot_id`` and ``as_of``, ``if_exists``, ``expire_tags`` (True or False), ``asset``; templated ones
    once rendered.
    """

    template_fields: Sequence[str] = (
        "table",
        "paimon_conn_id",
        "tag_name",
        "snapshot_id",
        "as_of",
        "time_retained",
    )

    def __init__(
        self,
        *,
        table: str,
        tag_name: str | None = None,
        snapshot_id: int | str | None = None,
        as_of: dt.datetime | str | None = None,
        time_retained: dt.timedelta | str | None = None,
        if_exists: str = "verify",
        expire_tags: bool = True,
        asset: Asset | None = None,
        asset_alias: str = DEFAULT_ASSET_ALIAS,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        outlets = list(kwargs.pop("outlets", None) or [])
        self.asset = asset
        self.asset_alias = AssetAlias(name=asset_alias) if asset is None else None
        outlets.append(asset if asset is not None else self.asset_alias)
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, outlets=outlets, **kwargs)
        self.tag_name = tag_name
        self.snapshot_id = snapshot_id
        self.as_of = as_of
        self.time_retained = time_retained
        self.if_exists = if_exists
        self.expire_tags = expire_tags
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        args.one_of(self.if_exists, "if_exists", periodic_tags.IF_EXISTS_MODES)
        args.flag(self.expire_tags, "expire_tags")
        if checkable(self.tag_name, rendered):
            args.tag_name(self.tag_name)
        if checkable(self.snapshot_id, rendered):
            args.whole_number(self.snapshot_id, "snapshot_id", minimum=1)
        if checkable(self.as_of, rendered):
            args.point_in_time(self.as_of, "as_of")
        if checkable(self.time_retained, rendered):
            args.duration(self.time_retained, "time_retained", positive=True)
        if checkable(self.snapshot_id, rendered) and checkable(self.as_of, rendered):
            raise args.ArgumentError("snapshot_id and as_of: give one of them, not both")
        if self.asset is not None and not isinstance(self.asset, Asset):
            raise args.ArgumentError(f"asset: expected an Asset (see paimon_table_asset), not {self.asset!r}")

    @staticmethod
    def _blank(value: Any) -> bool:
        # A template that rendered to nothing ("{{ params.tag or '' }}") means "not given".
        return value is None or (isinstance(value, str) and not value.strip())

    def _snapshot_id(self) -> int | None:
        value = self.snapshot_id
        if self._blank(value):
            return None
        if isinstance(value, bool) or not (isinstance(value, int) or str(value).strip().isdigit()):
            raise AirflowFailException(f"snapshot_id must be a whole number, not {value!r}")
        return int(str(value).strip())

    def execute(self, context: Context) -> dict[str, Any]:
        table = self.get_table()
        name = None if self._blank(self.tag_name) else str(self.tag_name)
        snapshot_id = self._snapshot_id()
        as_of = None if self._blank(self.as_of) else self.as_of
        time_retained = None if self._blank(self.time_retained) else self.time_retained

        tag_plan: periodic_tags.TagPlan | None = None
        if name is None:
            # The run's periodic tag: its name, and (unless a snapshot is given) its snapshot.
            try:
                tag_plan = plan_run(table, context)
                name = tag_plan.name
                choice = None if snapshot_id is not None or as_of is not None else \
                    periodic_tags.choose_snapshot(table, tag_plan)
            except (PaimonError, ValueError) as exc:
                raise task_failure(exc) from exc
            if choice is None:
                self.log.info("Run period %s of %s: tag %r (%s)", tag_plan.period, table.identifier, name,
                              tag_plan.spec.describe())
            else:
                self.log.info(
                    "Run period %s of %s: tag %r, due at %s (%s): %s",
                    tag_plan.period, table.identifier, name, choice.due.isoformat(), choice.rule, choice.message,
                )
                if choice.status == WAIT:
                    raise AirflowException(
                        f"{choice.message}. Wait for it with a TagTimeSensor before this task, or schedule the DAG "
                        "with TagPeriodTimetable"
                    )
                if choice.status == SKIPPED or choice.snapshot is None:
                    raise AirflowSkipException(choice.message)
                snapshot_id = choice.snapshot.id

        try:
            applied = periodic_tags.apply(
                table,
                name,
                snapshot_id=snapshot_id,
                as_of=as_of,
                time_retained=time_retained,
                if_exists=self.if_exists,
                expire_tags=bool(self.expire_tags),
            )
        except TagAlreadyExistsError as exc:
            if self.if_exists == "fail":
                raise AirflowFailException(str(exc)) from exc
            raise task_failure(exc) from exc
        except PaimonError as exc:
            raise task_failure(exc) from exc
        tag = applied.tag
        self.log.info(
            "Tag %r of %s %s: snapshot %d committed at %s",
            name, table.identifier, applied.status, tag.snapshot.id, applied.snapshot_time,
        )
        if applied.expiry_summary:
            self.log.info("%s", applied.expiry_summary)
        if name in applied.expired:
            self.log.warning(
                "Tag %r was expired right after it was created: the table keeps newer periodic tags "
                "(tag.num-retained-max) or its retention has already run out",
                name,
            )

        period = tag_plan.period if tag_plan is not None else None
        result: dict[str, Any] = {
            "table": table.identifier,
            "tag": name,
            "snapshot_id": tag.snapshot.id,
            "snapshot_time": applied.snapshot_time,
            "status": applied.status,
            "period_start": periodic_tags.iso_utc(period.start) if period is not None else None,
            "period_end": periodic_tags.iso_utc(period.end) if period is not None else None,
            "due": periodic_tags.iso_utc(tag_plan.due) if tag_plan is not None else None,
            "expired_tags": list(applied.expired),
        }
        result.update(self._previous_tag(table, name) if tag_plan is not None else
                      {"previous_tag": None, "previous_snapshot_id": None})
        self._emit_asset_event(context, table, result)
        ti = context.get("ti")
        if ti is not None:
            ti.xcom_push(key="tag_name", value=name)
            ti.xcom_push(key="snapshot_id", value=tag.snapshot.id)
        return result

    def _previous_tag(self, table: Table, name: str) -> dict[str, Any]:
        """The nearest earlier periodic tag and its snapshot, as Paimon's ``incremental-to-auto-tag`` finds it:
        the start of the period's change range (None when the table keeps no earlier periodic tag)."""
        try:
            request = request_from_options(table, {"incremental-to-auto-tag": name})
            if request is None or request.empty:
                return {"previous_tag": None, "previous_snapshot_id": None}
            previous = str(request.start)
            return {"previous_tag": previous, "previous_snapshot_id": table.tags.get(previous).snapshot.id}
        except PaimonError as exc:
            self.log.warning("No previous periodic tag of %r found on %s: %s", name, table.identifier, exc)
            return {"previous_tag": None, "previous_snapshot_id": None}

    def _emit_asset_event(self, context: Context, table: Table, result: dict[str, Any]) -> None:
        outlet_events = context.get("outlet_events")
        if outlet_events is None:
            return
        dag_run = context.get("dag_run")
        run_type = getattr(dag_run, "run_type", None)
        extra = {
            "tag": result["tag"],
            "snapshot_id": result["snapshot_id"],
            "previous_tag": result["previous_tag"],
            "previous_snapshot_id": result["previous_snapshot_id"],
            "table": result["table"],
            "warehouse": self.hook.warehouse,
            "status": result["status"],
            "period_start": result["period_start"],
            "period_end": result["period_end"],
            "run_type": str(getattr(run_type, "value", run_type)) if run_type is not None else None,
        }
        if isinstance(self.asset, Asset):
            outlet_events[self.asset].extra = extra
        elif isinstance(self.asset_alias, AssetAlias):  # no asset given: the table's, through the alias
            asset = table_asset(self.hook.warehouse, table.identifier)
            outlet_events[self.asset_alias].add(asset, extra=extra)
            self.log.info("Asset event for %s: %s", asset.name, extra)


class DeleteTagOperator(PaimonTableOperator):
    """Delete a tag, and the files only it used (files a retained snapshot or another tag uses stay).

    :param table: ``database.table`` (templated).
    :param tag_name: the tag (templated).
    :param ignore_missing: succeed when the tag does not exist (default: fail).
    :param dry_run: only report what would be deleted.
    :param paimon_conn_id: the Paimon connection (templated).

    Returns the cleanup summary (``tags``, ``files_freed``, ``bytes_freed``, ...).
    """

    template_fields: Sequence[str] = ("table", "paimon_conn_id", "tag_name")

    def __init__(
        self,
        *,
        table: str,
        tag_name: str,
        ignore_missing: bool = False,
        dry_run: bool = False,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, **kwargs)
        self.tag_name = tag_name
        self.ignore_missing = ignore_missing
        self.is_dry_run = dry_run  # not `dry_run`: that is BaseOperator's method
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.tag_name, rendered) or self.tag_name is None:
            args.tag_name(self.tag_name)
        args.flag(self.ignore_missing, "ignore_missing")
        args.flag(self.is_dry_run, "dry_run")

    def execute(self, context: Context) -> dict[str, Any]:
        table = self.get_table()
        dry_run = args.flag(self.is_dry_run, "dry_run")
        try:
            result = table.maintenance.delete_tag(self.tag_name, dry_run=dry_run)
        except TagNotFoundError as exc:
            if self.ignore_missing:
                self.log.info("Tag %r of %s does not exist; nothing to delete", self.tag_name, table.identifier)
                return cleanup_summary(None) | {"operation": "delete-tag", "dry_run": dry_run}
            raise task_failure(exc) from exc
        except PaimonError as exc:
            raise task_failure(exc) from exc
        summary = cleanup_summary(result)
        self.log.info("%s", summary["summary"])
        return summary
