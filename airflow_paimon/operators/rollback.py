"""RollbackOperator: make a tag, a snapshot or a point in time the table's latest state again, by the format
library's rollback (``table.maintenance.rollback``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_paimon import arguments as args
from airflow_paimon.format.errors import PaimonError
from airflow_paimon.hooks.paimon import PaimonHook
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.tags import PaimonTableOperator, cleanup_summary

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["RollbackOperator"]


class RollbackOperator(PaimonTableOperator):
    """Roll a table back to a tag, a snapshot id or a point in time: give exactly one of them.

    The snapshot named becomes the latest again; newer snapshots and newer tags are deleted with the files
    only they used. The target is explicit because a periodic tag's name (``2026-11-20``) also reads as a date:
    a tag that no longer exists fails the task, it is never taken for a time. A time in the future fails, and so
    does a time whose snapshot has expired unless a tag provably holds it (the error names the closest tag).

    :param table: ``database.table`` (templated).
    :param to_tag: the tag's name (templated).
    :param to_snapshot: the snapshot id (``int`` or digits) (templated).
    :param to_time: a past point in time (datetime or ISO 8601; without an offset, UTC) (templated).
    :param dry_run: only report what would be deleted (templated: ``"true"``/``"false"`` render to a bool).
    :param paimon_conn_id: the Paimon connection (templated).

    A template that renders to an empty string means "not given", so one DAG can offer all three as params
    (see the example DAG ``paimon_rollback``).

    Returns the cleanup summary (``rolled_back_to``, ``snapshots``, ``tags``, ``files_freed``, ...).
    """

    template_fields: Sequence[str] = ("table", "paimon_conn_id", "to_tag", "to_snapshot", "to_time", "is_dry_run")

    def __init__(
        self,
        *,
        table: str,
        to_tag: str | None = None,
        to_snapshot: int | str | None = None,
        to_time: dt.datetime | str | None = None,
        dry_run: bool | str = False,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, **kwargs)
        given = [n for n, v in (("to_tag", to_tag), ("to_snapshot", to_snapshot), ("to_time", to_time))
                 if v is not None]
        literal = [v for v in (to_tag, to_snapshot, to_time) if v is not None and "{{" not in str(v)]
        if not given or len(literal) > 1:
            raise ValueError(f"RollbackOperator {self.task_id!r}: give exactly one of to_tag, to_snapshot and "
                             f"to_time; got {', '.join(given) if given else 'none'}")
        self.to_tag = to_tag
        self.to_snapshot = to_snapshot
        self.to_time = to_time
        self.is_dry_run = dry_run  # not `dry_run`: that is BaseOperator's method
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.to_snapshot, rendered):
            args.whole_number(self.to_snapshot, "to_snapshot", minimum=1)
        if checkable(self.to_time, rendered):
            args.point_in_time(self.to_time, "to_time")
        if checkable(self.is_dry_run, rendered):
            args.flag(self.is_dry_run, "dry_run", rendered=rendered)

    def execute(self, context: Context) -> dict[str, Any]:
        # A template that rendered to nothing ("{{ params.tag or '' }}") means "not given".
        to_tag, to_snapshot, to_time = (None if isinstance(v, str) and not v.strip() else v
                                        for v in (self.to_tag, self.to_snapshot, self.to_time))
        dry_run = args.flag(self.is_dry_run, "dry_run", rendered=True)  # checked once rendered: "true" is True
        table = self.get_table()
        try:
            result = table.maintenance.rollback(to_tag=to_tag, to_snapshot=to_snapshot, to_time=to_time,
                                                dry_run=dry_run)
        except PaimonError as exc:
            raise task_failure(exc) from exc
        summary = cleanup_summary(result)
        self.log.info("%s", summary["summary"])
        return summary
