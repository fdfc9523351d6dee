"""Heavy table upkeep on Spark: compaction and orphan-file cleanup.

Both operators are :class:`~airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator`
subclasses (see :class:`~airflow_paimon.operators.merge.PaimonSparkSubmitOperator`: the warehouse comes from
the Paimon connection, ``local[*]`` with the worker's Python when there is no Spark connection, the package
shipped as ``--py-files`` zip for clusters).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_paimon import arguments as args
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.merge import PaimonSparkSubmitOperator, commit_identifier_for, commit_user_for

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["CompactOperator", "RemoveOrphanFilesOperator"]


class CompactOperator(PaimonSparkSubmitOperator):
    """Compact a Paimon table on Spark, in one COMPACT commit, exactly once per run.

    Primary-key tables: every bucket that has more than one file, a file below the top level or deleted rows is
    fully compacted into the top level (``num-levels - 1``), deleted keys dropped, sequence numbers kept.
    Append tables: small files (below ``target-file-size``) of each partition are merged. Snapshots and tags taken
    before keep reading the old files (they are only removed from the new snapshot; expiry deletes them later).

    :param target: ``database.table`` (templated).
    :param partitions: only these partitions: a list of ``{partition column: value}`` (templated).
    :param target_file_size: bytes per new file; default the table's ``target-file-size``.
    :param paimon_conn_id: the Paimon connection (templated).

    Returns (XCom) ``{"status", "snapshot_id", "buckets", "files_before", "files_after", ...}``.

    Checked when the DAG is parsed: ``target``, ``partitions`` (a list of mappings), ``target_file_size``
    (>= 1).
    """

    app_name = "compact_app"
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + ("target", "partitions")

    def __init__(self, *, target: str, partitions: Sequence[Mapping[str, Any]] | None = None,
                 target_file_size: int | None = None, paimon_conn_id: str = "paimon_default",
                 **kwargs: Any) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.target = target
        self.partitions = partitions
        self.target_file_size = target_file_size
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.target, rendered) or self.target is None:
            args.table_identifier(self.target, "target")
        if self.target_file_size is not None:
            args.whole_number(self.target_file_size, "target_file_size", minimum=1)
        partitions = self.partitions
        if checkable(partitions, rendered) and not isinstance(partitions, str):
            items = [partitions] if isinstance(partitions, Mapping) else partitions
            if not isinstance(items, (list, tuple)) or not all(isinstance(p, Mapping) for p in items):
                raise args.ArgumentError(
                    f"partitions: expected a list of {{partition column: value}} mappings, not {partitions!r}")

    def build_spec(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        spec: dict[str, Any] = {
            "target": self.target,
            "commit_user": commit_user_for(ti.dag_id, ti.task_id),
            "commit_identifier": commit_identifier_for(context, "compact"),
        }
        partitions = self.partitions
        if isinstance(partitions, Mapping):
            partitions = [partitions]
        if partitions:
            spec["partitions"] = [dict(p) for p in partitions]
        if self.target_file_size:
            spec["target_file_size"] = int(self.target_file_size)
        return spec

    def collect_result(self, context: Context, spec: dict[str, Any]) -> Any:
        printed = super().collect_result(context, spec) or {}
        return self.committed_result(spec, spec["commit_identifier"], printed,
                                     ("status", "buckets", "files_before", "files_after", "level", "snapshot_id"))


MIN_SAFE_AGE = dt.timedelta(hours=1)
"""Orphan cleanup below this age needs ``allow_recent=True``: live writers' uncommitted files are younger."""


def _older_than_args(value: Any) -> dict[str, Any]:
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, dt.timedelta):
        return {"older_than_age": f"{int(value.total_seconds() * 1000)} ms"}
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return {"older_than": int(value.timestamp() * 1000)}
    if isinstance(value, (int, float)):
        return {"older_than": int(value)}
    text = str(value).strip()
    if text[:1].isdigit() and any(c.isalpha() for c in text) and "-" not in text and ":" not in text:
        return {"older_than_age": text}  # "3 d", "12h"
    return {"older_than": text}  # a point in time


class RemoveOrphanFilesOperator(PaimonSparkSubmitOperator):
    """Delete files of a Paimon table that no snapshot, tag or changelog references and that are older than the
    safety age, with the format library's rules (``airflow_paimon.format.upkeep.orphans``).

    With ``use_spark=True`` (default) the Spark application lists and deletes in parallel (for big tables);
    with ``use_spark=False`` the worker runs ``table.maintenance.remove_orphan_files`` itself and no Spark job is
    submitted.

    :param target: ``database.table`` (templated).
    :param older_than: the safety age: a duration (``timedelta`` or ``'3 d'``) before now, or a point in time;
        default one day (templated). Less than one hour is refused unless ``allow_recent=True``.
    :param allow_recent: accept an ``older_than`` under one hour. Files that writers are still committing (a
        Spark or Flink job between writing its data files and committing them) are younger than that; deleting
        them breaks the commit. Only for tables nobody writes to.
    :param dry_run: only report what would be deleted.
    :param use_spark: run on Spark (default) or in the worker.
    :param paimon_conn_id: the Paimon connection (templated).

    Returns (XCom) the same dictionary with and without Spark (``OrphanResult.to_dict``): ``operation``,
    ``target``, ``status`` (``dry_run``, ``nothing_to_delete`` or ``deleted``), ``dry_run``, ``older_than``,
    ``scanned``, ``listing_units``, ``files`` (the first 1000 orphan paths), ``files_found``, ``files_freed``,
    ``files_deleted``, ``bytes_freed`` and ``seconds``.

    Checked when the DAG is parsed (templated values once rendered): ``target``, ``older_than`` (a duration or
    a point in time, at least one hour before now unless ``allow_recent``), ``allow_recent``, ``dry_run`` and
    ``use_spark`` (True or False).
    """

    app_name = "orphans_app"
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + ("target", "older_than")

    def __init__(self, *, target: str, older_than: Any = None, allow_recent: bool = False, dry_run: bool = False,
                 use_spark: bool = True, paimon_conn_id: str = "paimon_default", **kwargs: Any) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.target = target
        self.older_than = older_than
        self.allow_recent = allow_recent
        self.dry_run = dry_run
        self.use_spark = use_spark
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.target, rendered) or self.target is None:
            args.table_identifier(self.target, "target")
        for name in ("allow_recent", "dry_run", "use_spark"):
            args.flag(getattr(self, name), name)
        value = self.older_than
        if not checkable(value, rendered) or isinstance(value, (int, float)):
            return
        older = args.duration_or_time(value, "older_than")
        if self.allow_recent:
            return
        if isinstance(older, dt.datetime):
            moment = older if older.tzinfo is not None else older.replace(tzinfo=dt.timezone.utc)
            age = dt.datetime.now(dt.timezone.utc) - moment
        else:
            age = older
        if age < MIN_SAFE_AGE:
            raise args.ArgumentError(
                f"older_than: {value!r} would delete files younger than one hour, which writers may still be "
                "about to commit; use at least '1 h' (default one day), or pass allow_recent=True for a table "
                "nobody writes to")

    def build_spec(self, context: Context) -> dict[str, Any]:
        spec: dict[str, Any] = {"target": self.target, "dry_run": bool(self.dry_run)}
        spec.update(_older_than_args(self.older_than))
        return spec

    def execute(self, context: Context) -> Any:
        if self.use_spark:
            return super().execute(context)
        from airflow_paimon.format.options import parse_duration
        from airflow_paimon.format.upkeep.orphans import MAX_LISTED_FILES

        table = self.paimon_hook().get_table(self.target)
        args = _older_than_args(self.older_than)
        older: Any = None
        if "older_than_age" in args:
            older = parse_duration(args["older_than_age"], "older_than")
        elif "older_than" in args:
            older = args["older_than"]
        result = table.maintenance.remove_orphan_files(older_than=older, dry_run=bool(self.dry_run))
        self.log.info("%s", result.summary())
        return result.to_dict(MAX_LISTED_FILES)
