"""Heavy table upkeep on Spark: compaction and orphan-file cleanup.

Both operators are :class:`~airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator`
subclasses (see :class:`~airflow_paimon.operators.spark_submit.PaimonSparkSubmitOperator`: the warehouse comes
from the Paimon connection, ``local[*]`` with the worker's Python when there is no Spark connection, the package
shipped as ``--py-files`` zip for clusters, the result from the application's result file).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from airflow_paimon import arguments as args
from airflow_paimon.format import values
from airflow_paimon.local_merge.choose import ENGINES
from airflow_paimon.local_merge.engine import DEFAULT_MEMORY_BUDGET
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.spark_submit import (
    PaimonSparkSubmitOperator,
    commit_identifier_for,
    commit_user_for,
    table_or_target,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["CompactOperator", "RemoveOrphanFilesOperator"]


COMPACT_RESULT_KEYS = ("status", "buckets", "files_before", "files_after", "level", "snapshot_id")


class CompactOperator(PaimonSparkSubmitOperator):
    """Compact a Paimon table in the worker's process when it is small, on Spark otherwise: one COMPACT commit,
    exactly once per run, whichever engine ran it.

    Primary-key tables: every bucket that has more than one file, a file below the top level or deleted rows is
    fully compacted into the top level (``num-levels - 1``), deleted keys dropped, sequence numbers kept.
    Append tables: small files (below ``target-file-size``) of each partition are merged. Snapshots and tags taken
    before keep reading the old files (they are only removed from the new snapshot; expiry deletes them later).

    :param table: ``database.table`` (templated). ``target`` is its deprecated name.
    :param partitions: only these partitions: a list of ``{partition column: value}`` (templated).
    :param target_file_size: bytes per new file; default the table's ``target-file-size``.
    :param engine: ``auto`` (default): in the worker's process when the buckets to compact fit
        ``memory_budget`` (their Parquet size times 4, an estimate of their decoded size), on Spark otherwise;
        ``local``: always in the worker (buckets are compacted one at a time); ``spark``: always on Spark.
    :param memory_budget: bytes ``auto`` lets a compaction take in the worker (default 2 GiB, as the MERGE's).
    :param paimon_conn_id: the Paimon connection (templated).

    Returns (XCom) ``{"status", "snapshot_id", "buckets", "files_before", "files_after", "level", "engine",
    "engine_reason", ...}``; the task log says which engine ran and why.

    Checked when the DAG is parsed: ``table``, ``partitions`` (a list of mappings), ``target_file_size``
    (>= 1), ``engine``, ``memory_budget`` (>= 0).
    """

    app_name = "compact_app"
    commits_data = True
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + ("table", "partitions",
                                                                                         "engine")

    def __init__(self, *, table: str | None = None, partitions: Sequence[Mapping[str, Any]] | None = None,
                 target_file_size: int | None = None, engine: str = "auto",
                 memory_budget: int = DEFAULT_MEMORY_BUDGET, paimon_conn_id: str = "paimon_default",
                 target: str | None = None, **kwargs: Any) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.table = table_or_target(type(self).__name__, table, target)
        self.partitions = partitions
        self.target_file_size = target_file_size
        self.engine = engine
        self.memory_budget = memory_budget
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.table, rendered) or self.table is None:
            args.table_identifier(self.table, "table")
        if self.target_file_size is not None:
            args.whole_number(self.target_file_size, "target_file_size", minimum=1)
        if checkable(self.engine, rendered):
            args.one_of(self.engine, "engine", ENGINES)
        args.whole_number(self.memory_budget, "memory_budget", minimum=0)
        partitions = self.partitions
        if checkable(partitions, rendered) and not isinstance(partitions, str):
            items = [partitions] if isinstance(partitions, Mapping) else partitions
            if not isinstance(items, (list, tuple)) or not all(isinstance(p, Mapping) for p in items):
                raise args.ArgumentError(
                    f"partitions: expected a list of {{partition column: value}} mappings, not {partitions!r}")

    def build_spec(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        spec: dict[str, Any] = {
            "target": self.table,
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

    def execute(self, context: Context) -> Any:
        """In the worker when `engine` allows and the compaction fits (see the class), else on Spark."""
        if self.engine == "spark":
            return self._on_spark(context, "engine='spark'")
        from airflow_paimon.format.compaction_run import begin_compaction, compact_here

        spec = self.build_spec(context)
        run = begin_compaction(self.paimon_hook().get_table(spec["target"]), commit_user=spec["commit_user"],
                               commit_identifier=spec["commit_identifier"], partitions=spec.get("partitions"))
        budget = args.whole_number(self.memory_budget, "memory_budget", minimum=0)
        size = (f"{run.result.get('buckets', 0)} bucket(s) to compact, about {run.total_bytes / (1 << 20):.0f} MiB "
                f"decoded, for a {budget / (1 << 20):.0f} MiB budget")
        if run.done:
            reason = "nothing to compact" if run.result["status"] == "no_changes" else "the commit already landed"
        elif self.engine == "local":
            reason = "engine='local'"
        elif run.total_bytes > budget:
            return self._on_spark(context, f"too large for the worker: {size}")
        else:
            reason = f"fits in the worker: {size}"
        result = compact_here(run, spec.get("target_file_size"))
        self.log.info("Compaction of %s in the worker's process (%s): %s, snapshot %s", spec["target"], reason,
                      result["status"], result.get("snapshot_id"))
        keys = ("target", "commit_user", "commit_identifier", *COMPACT_RESULT_KEYS)
        return {**{k: result[k] for k in keys if k in result}, "engine": "local", "engine_reason": reason}

    def _on_spark(self, context: Context, reason: str) -> dict[str, Any]:
        self.log.info("Compaction of %s on Spark (%s)", self.table, reason)
        return dict(super().execute(context), engine="spark", engine_reason=reason)

    def collect_result(self, context: Context, spec: dict[str, Any], printed: dict[str, Any] | None) -> Any:
        return self.committed_result(spec, spec["commit_identifier"], printed or {}, COMPACT_RESULT_KEYS)


MIN_SAFE_AGE = dt.timedelta(hours=1)
"""Orphan cleanup below this age needs ``allow_recent=True``: live writers' uncommitted files are younger."""


def _older_than(value: Any) -> dt.timedelta | dt.datetime | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return args.duration_or_time(value, "older_than")


def _older_than_args(value: Any) -> dict[str, Any]:
    """``older_than`` for the Spark application: a safety age in Paimon's syntax or epoch milliseconds."""
    older = _older_than(value)
    if older is None:
        return {}
    if isinstance(older, dt.timedelta):
        return {"older_than_age": values.format_duration(older)}
    return {"older_than": values.epoch_millis(older)}


class RemoveOrphanFilesOperator(PaimonSparkSubmitOperator):
    """Delete files of a Paimon table that no snapshot, tag or changelog references and that are older than the
    safety age, with the format library's rules (``airflow_paimon.format.upkeep.orphans``).

    With ``use_spark=True`` (default) the Spark application lists and deletes in parallel (for big tables);
    with ``use_spark=False`` the worker runs ``table.maintenance.remove_orphan_files`` itself and no Spark job is
    submitted.

    :param table: ``database.table`` (templated). ``target`` is its deprecated name.
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

    Checked when the DAG is parsed (templated values once rendered): ``table``, ``older_than`` (a duration or
    a point in time, at least one hour before now unless ``allow_recent``), ``allow_recent``, ``dry_run`` and
    ``use_spark`` (True or False).
    """

    app_name = "orphans_app"
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + ("table", "older_than")

    def __init__(self, *, table: str | None = None, older_than: Any = None, allow_recent: bool = False,
                 dry_run: bool = False, use_spark: bool = True, paimon_conn_id: str = "paimon_default",
                 target: str | None = None, **kwargs: Any) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.table = table_or_target(type(self).__name__, table, target)
        self.older_than = older_than
        self.allow_recent = allow_recent
        self.is_dry_run = dry_run  # not `dry_run`: that is BaseOperator's method
        self.use_spark = use_spark
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.table, rendered) or self.table is None:
            args.table_identifier(self.table, "table")
        args.flag(self.allow_recent, "allow_recent")
        args.flag(self.is_dry_run, "dry_run")
        args.flag(self.use_spark, "use_spark")
        value = self.older_than
        if not checkable(value, rendered):
            return
        older = args.duration_or_time(value, "older_than")
        if self.allow_recent:
            return
        age = older if isinstance(older, dt.timedelta) else dt.datetime.now(dt.timezone.utc) - older
        if age < MIN_SAFE_AGE:
            raise args.ArgumentError(
                f"older_than: {value!r} would delete files younger than one hour, which writers may still be "
                "about to commit; use at least '1 h' (default one day), or pass allow_recent=True for a table "
                "nobody writes to")

    def build_spec(self, context: Context) -> dict[str, Any]:
        spec: dict[str, Any] = {"target": self.table, "dry_run": bool(self.is_dry_run)}
        spec.update(_older_than_args(self.older_than))
        return spec

    def execute(self, context: Context) -> Any:
        if self.use_spark:
            return super().execute(context)
        from airflow_paimon.format.upkeep.orphans import MAX_LISTED_FILES

        table = self.paimon_hook().get_table(str(self.table))  # checked once rendered
        result = table.maintenance.remove_orphan_files(older_than=_older_than(self.older_than),
                                                       dry_run=bool(self.is_dry_run))
        self.log.info("%s", result.summary())
        return result.to_dict(MAX_LISTED_FILES)

    def collect_result(self, context: Context, spec: dict[str, Any], printed: dict[str, Any] | None) -> Any:
        """The application's ``OrphanResult.to_dict``, the worker's shape. Nothing is committed, so the table
        cannot stand in for a lost result: the task fails and its retry (cleanup is idempotent) reports anew."""
        if not printed:
            raise AirflowException(
                f"{Path(self.application).name} finished without writing its result; retry the task (removing "
                "orphan files again is safe)")
        return printed
