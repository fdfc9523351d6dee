"""MergeIncrementalOperator: MERGE an increment into a Paimon primary-key table, in the worker or with Spark.

``engine="auto"`` (default) merges in the worker's own process (``airflow_paimon.local_merge``: no JVM, no
``spark-submit``) when the source is local Parquet, the source and the target buckets it touches fit
``memory_budget`` and every clause translates exactly; otherwise it submits the Spark application.

The operator is a :class:`~airflow_paimon.operators.spark_submit.PaimonSparkSubmitOperator` (the Spark provider's
``SparkSubmitOperator``) whose application is the merge app shipped inside this package
(``airflow_paimon/spark/merge_app.py``); see there for the Spark connection, secrets, results and clusters.

Exactly-once: the commit user is ``airflow:<dag_id>.<task_id>`` and the commit identifier a stable int64 hash
of the dag id, task id, map index and the run's data interval, so a retry (or a backfill re-run) of a merge
whose commit already landed does nothing. ``reapply=True`` merges again on purpose, under an identifier of
the run and try (so a later run re-applying the same day merges again, and a retried try does not). A change
feed's identifier is its range's (spark/merge/feed.py); under ``engine="auto"`` a feed whose commit already
landed, or whose range is empty, is settled in the worker without submitting the application.

No Airflow import is needed by the Spark side: the application only imports ``airflow_paimon.spark`` and
``airflow_paimon.format``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_paimon import arguments as args
from airflow_paimon.format import values
from airflow_paimon.format.consumers import check_consumer_id
from airflow_paimon.format.errors import InvalidOptionError, PaimonError
from airflow_paimon.lineage import LineageDataset, merged_columns, path_dataset, table_dataset
from airflow_paimon.local_merge.choose import ENGINES
from airflow_paimon.local_merge.engine import DEFAULT_MEMORY_BUDGET
from airflow_paimon.merge import FEED_KEY, SOURCE_FORMATS, MergeClause, parse_clauses
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.runs import plan_run
from airflow_paimon.operators.spark_submit import (
    PaimonSparkSubmitOperator,
    commit_identifier_for,
    commit_user_for,
    reapply_token_for,
    table_or_target,
)
from airflow_paimon.spark.common import reapply_identifier

FEED_OPERATOR_KEYS = {FEED_KEY, "period", "start", "end", "consumer_id", "mode", "warehouse", "options"}

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["MergeIncrementalOperator"]


class MergeIncrementalOperator(PaimonSparkSubmitOperator):
    """MERGE a source (files, a Paimon table or its changes between two snapshots/tags, or a SQL query) into a
    Paimon primary-key table, on Spark, exactly once per run.

    :param table: the target table, ``database.table`` (templated). ``target`` is its deprecated name.
    :param source: what to merge (templated): a path/URI of files (read with ``source_format``), a table
        identifier (``source_format="paimon"``), a query (``source_format="sql"``), or a mapping
        ``{"path"|"table"|"sql": ..., ...}``; for a table: ``snapshot_id``/``tag``/``as_of`` (the rows at that
        point) and ``from_snapshot_id``/``from_tag``/``from_as_of`` (only the rows that differ from that point,
        with a ``_change`` column of ``+I``/``+U``/``-D``); an ``as_of`` whose snapshot expired fails naming the
        closest tag unless ``"closest_tag": True`` asks to read that tag. Another table's change feed:
        ``{"change_feed": "db.src", ...}`` with exactly one of ``"period": True`` (the run's periodic tag of the
        source and the nearest earlier one, Paimon's ``incremental-to-auto-tag``), ``"start"`` (exclusive, with an
        optional inclusive ``"end"``: snapshot ids or tag names) or ``"consumer_id"`` (from the consumer's
        position to the latest snapshot; advanced only after the merge's commit landed); optional ``"mode"``.
        Deleted keys are deleted, every other change upserts, the last change of a key in commit order wins.
        The commit identifier is derived from the range (for a consumer, its position), so a retry after any
        failure applies the range exactly once, also when the commit landed but the consumer did not advance.
    :param source_format: ``parquet`` (default), ``csv`` (header line expected), ``json``, ``orc``, ``avro``,
        ``paimon`` or ``sql`` (templated).
    :param on: the columns matching source to target rows; default the target's primary key; they must include
        it (templated).
    :param clauses: the MERGE clauses (``airflow_paimon.merge``: ``matched_update``, ``matched_delete``,
        ``not_matched_insert``, ``not_matched_by_source_update``, ``not_matched_by_source_delete``, or their
        dicts); Spark SQL conditions with the target aliased ``t`` and the source ``s``; default the plain
        upsert ``[matched_update(set="*"), not_matched_insert(values="*")]``, which reads no target data
        (templated).
    :param reapply: merge again even though this day's commit already landed, under a commit identifier of the
        run id and try number: every run (and every try) that re-applies merges the source as it is then; a
        repeat of the same try finds its commit and does nothing (templated).
    :param driver_bytes: a plain upsert of local Parquet files of at most this size (default 64 MiB) is written
        by the application's driver without any Spark job, which saves Spark's start-up (seconds) on small
        daily increments; 0 always runs Spark jobs.
    :param engine: ``auto`` (default): in the worker's process when the source is local Parquet files, the
        source and the target buckets it touches fit ``memory_budget`` and every condition and expression
        translates exactly to the in-process engine; on Spark otherwise. ``local``: always in the worker (a MERGE
        it cannot run fails saying why); ``spark``: always on Spark. The XCom's ``engine`` and
        ``engine_reason`` and the task log say which ran and why (templated).
    :param memory_budget: bytes the in-process engine may use (default 2 GiB); ``auto`` runs larger MERGEs on
        Spark.
    :param paimon_conn_id: the Paimon connection (templated).
    :param ship_package: see :class:`~airflow_paimon.operators.spark_submit.PaimonSparkSubmitOperator`.

    Every other keyword goes to ``SparkSubmitOperator`` (``conn_id`` -- default ``spark_default``; without that
    connection Spark runs ``local[*]`` --, ``conf``, ``executor_memory``, ``py_files``, ...). For a cluster the
    package is shipped with ``--py-files`` as a zip built from the installed ``airflow_paimon`` (cached in the
    temp directory by content hash); the cluster's Python needs pyarrow, numpy and fastavro.

    Returns (XCom) ``{"status", "snapshot_id", "commit_user", "commit_identifier", ...}``: ``committed`` with
    the new snapshot, ``already_committed`` with the snapshot holding the commit, or ``no_changes`` with the
    latest snapshot (also for an increment folder without data files: a day without changes).

    Checked when the DAG is parsed (templated values once rendered): ``table`` (``database.table``),
    ``source_format``, ``on`` (column names, each once), ``clauses`` (shape; no clause after an unconditional
    one of the same kind; every condition and expression parses as Spark SQL; an insert with explicit values
    sets every ``on`` column), ``reapply``, ``driver_bytes`` (>= 0). Column names are checked against the
    tables at run time.
    """

    app_name = "merge_app"
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + (
        "table", "source", "source_format", "on", "clauses", "reapply", "engine",
    )
    template_fields_renderers = {"clauses": "json", "source": "json"}

    def __init__(self, *, table: str | None = None, source: Any, source_format: str = "parquet",
                 on: Any = None, clauses: Sequence[MergeClause | Mapping[str, Any]] | str | None = None,
                 reapply: Any = False, driver_bytes: int | None = None, engine: str = "auto",
                 memory_budget: int = DEFAULT_MEMORY_BUDGET, paimon_conn_id: str = "paimon_default",
                 target: str | None = None, **kwargs: Any) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.table = table_or_target(type(self).__name__, table, target)
        self.source = source
        self.source_format = source_format
        self.on = on
        if clauses is not None and not isinstance(clauses, str):
            # Checked now (a DAG with a malformed clause fails to import) and kept as dicts, which templates
            # render and DAG serialisation stores.
            clauses = [c.to_dict() for c in parse_clauses(list(clauses))]
        self.clauses = clauses
        self.reapply = reapply
        self.driver_bytes = driver_bytes
        self.engine = engine
        self.memory_budget = memory_budget
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.table, rendered) or self.table is None:
            args.table_identifier(self.table, "table")
        if checkable(self.source_format, rendered):
            # Spark reads the format name in any case ('CSV' is 'csv').
            text = self.source_format.lower() if isinstance(self.source_format, str) else self.source_format
            args.one_of(text, "source_format", SOURCE_FORMATS)
        if self.source is None or (isinstance(self.source, str) and rendered and not self.source.strip()):
            raise args.ArgumentError("source: give the files, table or query to merge")
        if isinstance(self.source, Mapping) and FEED_KEY in self.source:
            self._check_feed(self.source, rendered)
        on = args.merge_on(self.on) if checkable(self.on, rendered) and self.on != [] else None
        if checkable(self.clauses, rendered):
            args.merge_clauses(self.clauses, "clauses", on)
        if checkable(self.reapply, rendered):
            args.flag(self.reapply, "reapply", rendered=True)
        if self.driver_bytes is not None:
            args.whole_number(self.driver_bytes, "driver_bytes", minimum=0)
        if checkable(self.engine, rendered):
            args.one_of(self.engine, "engine", ENGINES)
        args.whole_number(self.memory_budget, "memory_budget", minimum=0)

    def execute(self, context: Context) -> Any:
        """In the worker when `engine` allows and the MERGE fits (see the class), else on Spark."""
        if self.engine == "spark":
            self.log.info("MERGE into %s on Spark: engine='spark'", self.table)
            return dict(super().execute(context), engine_reason="engine='spark'")
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_paimon.format.errors import (
            InvalidDataError,
            MergeClauseError,
            SchemaMismatchError,
            UnsupportedTableError,
        )
        from airflow_paimon.local_merge.choose import LocalMergeRefused, merge_here_or_refuse

        spec = self.build_spec(context)
        if self.engine == "auto" and isinstance(spec["source"], Mapping) and FEED_KEY in spec["source"]:
            settled = self._settled_feed(spec)
            if settled is not None:
                return settled
        ident = spec["commit_identifier"]
        if spec.get("reapply"):
            ident = reapply_identifier(ident, spec["reapply_token"])
        try:
            decision = merge_here_or_refuse(
                self.paimon_hook().get_table(spec["target"]), spec["source"], source_format=spec["source_format"],
                clauses=spec["clauses"], on=spec["on"], commit_user=spec["commit_user"], commit_identifier=ident,
                memory_budget=args.whole_number(self.memory_budget, "memory_budget", minimum=0), engine=self.engine)
        except (MergeClauseError, InvalidDataError, SchemaMismatchError, UnsupportedTableError,
                LocalMergeRefused) as e:
            # Bad input, as the Spark application reports it: running the task again cannot help.
            raise AirflowFailException(f"{e} [the in-process MERGE refused its input; the task is not retried]") \
                from e
        if decision.result is not None:
            self.log.info("MERGE into %s in the worker's process, as %s: %s (snapshot %s)", spec["target"],
                          decision.reason, decision.result["status"], decision.result.get("snapshot_id"))
            return decision.result
        self.log.info("MERGE into %s on Spark: %s", spec["target"], decision.reason)
        return dict(super().execute(context), engine_reason=decision.reason)

    def _settled_feed(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        """A change-feed MERGE that reads no change (its range's commit already landed: a re-run of a merged day;
        or the range is empty: a consumer with nothing new) finishes here, as its application would, without a
        ``spark-submit``; None when the application must run."""
        from airflow_paimon.format.errors import CommitConflictError
        from airflow_paimon.spark.merge import MergeSpec
        from airflow_paimon.spark.merge.feed import merge_settled_feed

        paimon = self.paimon_hook()
        try:
            done = merge_settled_feed(MergeSpec.from_dict(dict(spec, warehouse=paimon.warehouse,
                                                               options=dict(paimon.options))))
        except CommitConflictError:
            raise   # a consumer advanced meanwhile: a retry may succeed
        except (PaimonError, ValueError) as exc:   # bad input, as the application reports it: not retried
            raise task_failure(exc) from exc
        if done is None:
            return None
        reason = "the change feed's commit already landed" if done["status"] == "already_committed" else \
            "the change feed's range is empty"
        self.log.info("MERGE into %s in the worker's process, as %s: %s (snapshot %s)", spec["target"], reason,
                      done["status"], done.get("snapshot_id"))
        keys = ("target", "commit_user", "commit_identifier", "status", "rows", "mode", "snapshot_id")
        return {**{k: done[k] for k in keys if k in done}, "engine": "local", "engine_reason": reason}

    @staticmethod
    def _check_feed(source: Mapping[str, Any], rendered: bool) -> None:
        unknown = set(source) - FEED_OPERATOR_KEYS
        if unknown:
            raise args.ArgumentError(f"source: unknown change-feed key(s) {sorted(unknown)}; known: "
                                     f"{sorted(FEED_OPERATOR_KEYS)}")
        if checkable(source[FEED_KEY], rendered):
            args.table_identifier(source[FEED_KEY], "source.change_feed")
        given = [k for k in ("period", "start", "consumer_id") if source.get(k) not in (None, "", False)]
        if len(given) != 1:
            raise args.ArgumentError(f"source: a change feed needs exactly one of period=True, start (with an "
                                     f"optional end) or consumer_id; got {given or 'none'}")
        if source.get("end") not in (None, "") and given != ["start"]:
            raise args.ArgumentError("source.end: only with start (a period or a consumer sets its own end)")
        if checkable(source.get("consumer_id"), rendered):
            try:
                check_consumer_id(source["consumer_id"])
            except InvalidOptionError as exc:
                raise args.ArgumentError(f"source.consumer_id: {exc}") from None

    def _source_for_run(self, context: Context) -> Any:
        """The source as the application reads it: a change feed's period becomes the run's periodic tag of the
        source table (the application resolves the nearest earlier one, as ``incremental-to-auto-tag``)."""
        source = self.source
        if not (isinstance(source, Mapping) and FEED_KEY in source and source.get("period")):
            return source
        from airflow_paimon.format import Catalog

        if source.get("warehouse"):
            table = Catalog(source["warehouse"], source.get("options") or {}).get_table(source[FEED_KEY])
        else:
            table = self.paimon_hook().get_table(source[FEED_KEY])
        try:
            tag = plan_run(table, context).name
        except PaimonError as exc:
            raise task_failure(exc) from exc
        if not table.tags.exists(tag):
            raise task_failure(InvalidOptionError(
                f"the run's periodic tag {tag!r} does not exist on {table.identifier}: create it first "
                "(CreateTagOperator upstream of this task)"))
        resolved = {k: v for k, v in source.items() if k != "period"}
        resolved["to_auto_tag"] = tag
        return resolved

    def build_spec(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        spec: dict[str, Any] = {
            "target": self.table,
            "source": self._source_for_run(context),
            "source_format": self.source_format or "parquet",
            "on": self.on,
            "clauses": self.clauses,
            "commit_user": commit_user_for(ti.dag_id, ti.task_id),
            "commit_identifier": commit_identifier_for(context, "merge"),
        }
        if self.driver_bytes is not None:
            spec["driver_bytes"] = args.whole_number(self.driver_bytes, "driver_bytes", minimum=0)
        if values.boolean(self.reapply, "reapply", default=False):
            spec["reapply"] = True
            spec["reapply_token"] = reapply_token_for(context)
        return spec

    def collect_result(self, context: Context, spec: dict[str, Any], printed: dict[str, Any] | None) -> Any:
        ident = spec["commit_identifier"]
        if printed and isinstance(spec["source"], Mapping) and FEED_KEY in spec["source"] \
                and printed.get("commit_identifier") is not None:
            ident = int(printed["commit_identifier"])   # derived from the range by the application
        elif spec.get("reapply"):
            ident = reapply_identifier(ident, spec["reapply_token"])
        return self.committed_result(spec, ident, printed or {},
                                     ("status", "rows", "mode", "engine", "snapshot_id"))

    commits_data = True

    def lineage(self, result: Mapping[str, Any] | None) -> tuple[list[LineageDataset], list[LineageDataset]]:
        """The source (files or a table) in, the target out, with each target column's source columns."""
        inputs, outputs = super().lineage(result)
        hook = self.lineage_hook()
        source = dict(self.source) if isinstance(self.source, Mapping) else {
            {"paimon": "table", "sql": "sql"}.get(str(self.source_format or "parquet"), "path"): self.source}
        if source.get("table") or source.get(FEED_KEY):
            identifier = str(source.get("table") or source[FEED_KEY])
            inputs.append(table_dataset(hook.warehouse, self.lineage_table(identifier)))
        elif source.get("path"):
            namespace, name = path_dataset(str(source["path"]))
            inputs.append(LineageDataset(namespace, name))
        target = outputs[0]
        clauses = parse_clauses(self.clauses)
        key_columns = [str(c) for c in self.on] if isinstance(self.on, (list, tuple)) else []
        written = merged_columns([n for n, _ in target.fields], clauses)
        for column in key_columns:
            written.setdefault(column, []).insert(0, ("s", column))
        by_alias = {"t": (target.namespace, target.name)}
        if inputs:
            by_alias["s"] = (inputs[0].namespace, inputs[0].name)
        target.column_lineage = {
            column: [(*by_alias[alias], src) for alias, src in sources if alias in by_alias]
            for column, sources in written.items()}
        return inputs, outputs
