"""ExpireSnapshotsOperator: expire a Paimon table's old snapshots (and tags) as Paimon does.

Thin: the rules (which snapshots may go, which files no retained snapshot or tag still uses) are the format
library's (``table.maintenance.expire_snapshots`` / ``expire_tags``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_paimon import arguments as args
from airflow_paimon.format.errors import PaimonError
from airflow_paimon.format.upkeep.expire_policy import ExpirePolicy
from airflow_paimon.hooks.paimon import PaimonHook
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.tags import PaimonTableOperator, cleanup_summary

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["ExpireSnapshotsOperator"]


class ExpireSnapshotsOperator(PaimonTableOperator):
    """Expire the oldest snapshots of a table, and (by default) its expired and surplus tags first.

    Every limit defaults to the table's options, as in Paimon: ``snapshot.num-retained.min``,
    ``snapshot.num-retained.max``, ``snapshot.time-retained``, ``snapshot.expire.limit``; tags follow
    ``tag.num-retained-max`` and their own retention. A file any retained snapshot or tag still uses is never
    deleted.

    :param table: ``database.table`` (templated).
    :param retain_min: keep at least this many of the newest snapshots (templated).
    :param retain_max: keep at most this many snapshots (templated).
    :param older_than: expire only snapshots replaced before this: a duration before now (``timedelta`` or
        ``'7d'``) or a point in time (templated); default: now - ``snapshot.time-retained``.
    :param max_deletes: expire at most this many snapshots in one go (templated).
    :param expire_tags: expire tags (retention ran out, or beyond ``tag.num-retained-max``) first.
    :param dry_run: only report what would be deleted.
    :param paimon_conn_id: the Paimon connection (templated).

    Returns (XCom) ``{"snapshots_expired", "tags_expired", "files_freed", "bytes_freed", "snapshots": {...},
    "tags": {...}, "summary"}`` and logs the summary.

    Checked when the DAG is parsed: ``table``, ``retain_min`` and ``retain_max`` (whole numbers >= 1,
    ``retain_min <= retain_max``), ``older_than`` (a duration or a point in time), ``max_deletes`` (>= 1),
    ``expire_tags`` and ``dry_run`` (True or False); templated ones once rendered.
    """

    template_fields: Sequence[str] = (
        "table",
        "paimon_conn_id",
        "retain_min",
        "retain_max",
        "older_than",
        "max_deletes",
    )

    def __init__(
        self,
        *,
        table: str,
        retain_min: int | str | None = None,
        retain_max: int | str | None = None,
        older_than: dt.timedelta | dt.datetime | str | None = None,
        max_deletes: int | str | None = None,
        expire_tags: bool = True,
        dry_run: bool = False,
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, **kwargs)
        self.retain_min = retain_min
        self.retain_max = retain_max
        self.older_than = older_than
        self.max_deletes = max_deletes
        self.expire_tags = expire_tags
        self.is_dry_run = dry_run  # not `dry_run`: that is BaseOperator's method
        self.check_arguments_at_parse_time()

    def _overrides(self, rendered: bool = True) -> dict[str, Any]:
        """The expiry limits given (a blank rendered template means "not given", one still to render is skipped)."""
        names = ("retain_min", "retain_max", "older_than", "max_deletes")
        return {name: getattr(self, name) if checkable(getattr(self, name), rendered) else None for name in names}

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        ExpirePolicy.check_arguments(**self._overrides(rendered))
        args.flag(self.expire_tags, "expire_tags")
        args.flag(self.is_dry_run, "dry_run")

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = args.flag(self.is_dry_run, "dry_run")
        table = self.get_table()
        try:
            policy = ExpirePolicy.from_options(table.options(), **self._overrides())
            tags = cleanup_summary(table.maintenance.expire_tags(dry_run=dry_run)) if self.expire_tags else None
            snapshots = cleanup_summary(table.maintenance.expire_snapshots(policy=policy, dry_run=dry_run))
        except PaimonError as exc:
            raise task_failure(exc) from exc

        parts = [p for p in (tags, snapshots) if p is not None]
        result: dict[str, Any] = {
            "table": table.identifier,
            "dry_run": dry_run,
            "snapshots_expired": len(snapshots["snapshots"]),
            "tags_expired": len(tags["tags"]) if tags is not None else 0,
            "files_freed": sum(p["files_freed"] for p in parts),
            "bytes_freed": sum(p["bytes_freed"] for p in parts),
            "snapshots": snapshots,
            "tags": tags,
        }
        verb = "would free" if dry_run else "freed"
        result["summary"] = (
            f"{table.identifier}: {result['snapshots_expired']} snapshot(s) and {result['tags_expired']} tag(s) "
            f"expired; {verb} {result['files_freed']} file(s), {result['bytes_freed']} bytes"
        )
        if tags is not None and tags["summary"]:
            self.log.info("%s", tags["summary"])
        if snapshots["summary"]:
            self.log.info("%s", snapshots["summary"])
        self.log.info("%s", result["summary"])
        return result
