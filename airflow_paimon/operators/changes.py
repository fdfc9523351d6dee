"""ExportChangesOperator: write a run's change feed (``table.changes``) as Parquet files in a folder of its own, in
the worker or on Spark.

Thin: which rows changed, in which mode, between which snapshots is the format library's change feed; the range of
a run's period is the library's ``incremental-to-auto-tag`` resolution; the folder (its files, its manifest written
last, replacing an earlier attempt) is ``airflow_paimon.format.changes.export``, which both engines use. The
operator owns the choice of engine and when a consumer moves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_paimon import arguments as args
from airflow_paimon.format.changes import MODES, request_from_options
from airflow_paimon.format.changes.export import MARKER, PartWriter, clear_folder, finish_folder, manifest
from airflow_paimon.format.changes.feed import ChangePlan, plan_changes
from airflow_paimon.format.consumers import check_consumer_id
from airflow_paimon.format.errors import InvalidOptionError, PaimonError
from airflow_paimon.format.fileio import FileIO
from airflow_paimon.format.period_tags import READY, plan_period_tag
from airflow_paimon.lineage import LineageDataset, path_dataset, table_dataset
from airflow_paimon.local_merge.choose import ENGINES
from airflow_paimon.local_merge.engine import DEFAULT_MEMORY_BUDGET
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.runs import plan_run
from airflow_paimon.operators.spark_submit import PaimonSparkSubmitOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_paimon.format import Table
    from airflow_paimon.format.periodic_tags import TagPlan

__all__ = ["MARKER", "ExportChangesOperator"]


class ExportChangesOperator(PaimonSparkSubmitOperator):
    """Write the rows that changed in a table over one range as Parquet files in the folder ``path``: small ranges
    in the worker's process, large ones with a Spark application (``engine``).

    The range is exactly one of:

    * ``period=True``: the run's period, from the previous period's tag to the run's periodic tag (a diff by
      default). The run's tag must exist (create it upstream with
      :class:`~airflow_paimon.operators.tags.CreateTagOperator`). While the previous period's tag does not exist
      yet (a backfill running periods out of order), the range starts at the snapshot that tag will hold, so each
      period exports exactly its own changes whatever order the runs go in; where that is unknown (no snapshot
      before that tag was due), Paimon's ``incremental-to-auto-tag`` rule applies: from the nearest earlier
      periodic tag, and with none the export is empty, as Paimon's answer is.
    * ``start`` (exclusive) and optionally ``end`` (inclusive, default: the latest snapshot): snapshot ids, tag
      names or times.
    * ``consumer_id``: from that consumer's position to the latest snapshot when the task starts. The consumer is
      advanced past that snapshot only once the folder is complete, so a run that fails reads the same range again.

    The folder is complete when its ``_SUCCESS`` file exists: data files (``part-*.parquet``) are written first,
    the marker last, as a JSON manifest listing each file with its row count, the range and the counts by
    ``_change_type``. Readers read a folder only once its marker is there (Spark's and Hadoop's convention), and
    may take the file list from the manifest; the files' names sort in the feed's order.

    A re-run replaces the folder: the marker goes first (the folder reads as incomplete from then on), then every
    file an earlier attempt left, then the new files are written, and the marker last. A temporary sibling folder
    renamed over the old one is not used because object stores have no rename (it would be a copy, not atomic);
    deleting the marker first gives the same guarantee everywhere: whenever a marker exists, the folder holds
    exactly the files it lists. A folder holding anything this operator does not write (other files, subfolders)
    is refused before anything is deleted. Both engines keep these rules (``airflow_paimon.format.changes.export``).

    In the worker, batches are written as they are read, so memory holds one batch, never the range. On Spark
    (``airflow_paimon/spark/export_app.py``) the driver plans the feed, tasks read consecutive stretches of it and
    write ``part-<task>-<n>.parquet`` files, and the driver writes the manifest once every task succeeded.

    :param table: ``database.table`` (templated).
    :param path: the run's folder: a local path or an object-store URI, read with the connection's filesystem
        options (templated), e.g. ``'s3://exports/orders/{{ ds }}'``.
    :param period: export the run's period.
    :param start: the range's exclusive start: a snapshot id, a tag name or a time (templated).
    :param end: the range's inclusive end (templated); only with ``start``.
    :param consumer_id: export from this consumer's position, and advance it afterwards (templated).
    :param mode: Paimon's scan mode: ``auto`` (default), ``changelog``, ``delta`` or ``diff``.
    :param columns: the table's columns to export (default: all); the change columns always follow.
    :param max_rows_per_file: roll to a new Parquet file after this many rows (templated).
    :param engine: ``auto`` (default): in the worker when the files the range reads fit ``memory_budget`` (their
        Parquet size times 4, an estimate of their decoded size, as the compaction's), on Spark otherwise;
        ``local``: always in the worker; ``spark``: always on Spark (templated).
    :param memory_budget: bytes ``auto`` lets an export read in the worker (default 2 GiB, as the MERGE's).
    :param paimon_conn_id: the Paimon connection (templated).

    Every other keyword goes to ``SparkSubmitOperator`` (``conn_id``, ``conf``, ...), as for
    :class:`~airflow_paimon.operators.merge.MergeIncrementalOperator`.

    Returns (XCom), whichever engine ran, ``{"table", "path", "start", "end", "mode", "rows", "counts", "files",
    "consumer", "engine", "engine_reason"}``; ``counts`` maps each ``_change_type`` to its rows, and the log says
    the same, with the engine and why it ran.

    Checked when the DAG is parsed: ``table``; exactly one of ``period``, ``start`` and ``consumer_id``; ``end``
    only with ``start``; ``consumer_id`` (Paimon's file-name rule); ``mode``; ``columns`` (names);
    ``max_rows_per_file`` (>= 1); ``path`` given; ``engine``; ``memory_budget`` (>= 0); templated ones once
    rendered.
    """

    app_name = "export_app"
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + (
        "table", "path", "start", "end", "consumer_id", "max_rows_per_file", "engine")

    def __init__(
        self,
        *,
        table: str,
        path: str,
        period: bool = False,
        start: int | str | dt.datetime | None = None,
        end: int | str | dt.datetime | None = None,
        consumer_id: str | None = None,
        mode: str = "auto",
        columns: Sequence[str] | None = None,
        max_rows_per_file: int | str = 1_000_000,
        engine: str = "auto",
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        paimon_conn_id: str = "paimon_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.table = table
        self.path = path
        self.period = period
        self.start = start
        self.end = end
        self.consumer_id = consumer_id
        self.mode = mode
        self.columns = columns
        self.max_rows_per_file = max_rows_per_file
        self.engine = engine
        self.memory_budget = memory_budget
        self._export_range: tuple[Any, Any, str, list[str] | None] | None = None
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.table, rendered) or self.table is None:
            args.table_identifier(self.table, "table")
        if checkable(self.engine, rendered):
            args.one_of(self.engine, "engine", ENGINES)
        args.whole_number(self.memory_budget, "memory_budget", minimum=0)
        if self.path is None or (isinstance(self.path, str) and rendered and not self.path.strip()):
            raise args.ArgumentError("path: give the run's export folder (a local path or an object-store URI)")
        if not isinstance(self.path, str):
            raise args.ArgumentError(f"path: expected a folder path or URI, not {self.path!r}")
        args.flag(self.period, "period")
        ranges = (("period", self.period or None), ("start", self.start), ("consumer_id", self.consumer_id))
        given = [name for name, value in ranges if checkable(value, rendered)]
        pending = [name for name, value in ranges if value is not None and not rendered and args.is_template(value)]
        if len(given) > 1 or not (given or pending):
            what = " and ".join(given) if given else "none of them"
            raise args.ArgumentError(f"period, start and consumer_id: give exactly one range (the run's period, an "
                                     f"explicit start[/end] or a consumer), got {what}")
        if checkable(self.end, rendered) and "start" not in given + pending:
            raise args.ArgumentError("end: only with start (a period or a consumer sets its own end)")
        if checkable(self.consumer_id, rendered):
            try:
                check_consumer_id(self.consumer_id)
            except InvalidOptionError as exc:
                raise args.ArgumentError(f"consumer_id: {exc}") from None
        args.one_of(self.mode, "mode", MODES)
        if self.columns is not None and (isinstance(self.columns, str) or not all(
                isinstance(c, str) and c for c in self.columns) or not self.columns):
            raise args.ArgumentError(f"columns: expected a non-empty list of column names, not {self.columns!r}")
        if checkable(self.max_rows_per_file, rendered):
            args.whole_number(self.max_rows_per_file, "max_rows_per_file", minimum=1)

    @staticmethod
    def _given(value: Any) -> Any:
        return None if value is None or (isinstance(value, str) and not value.strip()) else value

    @staticmethod
    def _bound(value: Any) -> Any:
        """A snapshot id arrives from a template as text: digits are a snapshot id, as in Paimon's options."""
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        return value

    def _range(self, table: Table, context: Context) -> tuple[Any, Any, str]:
        """(start, end, mode) of the run (an empty period is (tag, tag]); a consumer's end is pinned to the latest
        snapshot now, so that it is advanced past exactly what was exported."""
        mode = str(self.mode).strip().lower()
        if self.period:
            run = plan_run(table, context)
            tag = run.name
            if not table.tags.exists(tag):
                raise InvalidOptionError(f"the run's periodic tag {tag!r} does not exist on {table.identifier}: "
                                         "create it first (CreateTagOperator upstream of this task)")
            start = _previous_period_start(table, run)
            if start is not None:
                return start, tag, "diff" if mode == "auto" else mode
            request = request_from_options(table, {"incremental-to-auto-tag": tag})
            assert request is not None
            if request.empty:
                self.log.warning("No periodic tag of %s before %r: the period's export is empty, as Paimon's "
                                 "incremental-to-auto-tag answers", table.identifier, tag)
                return tag, tag, mode
            return request.start, request.end, request.mode if mode == "auto" else mode
        end = self._given(self.end)
        if self._given(self.consumer_id) is not None:
            return None, table.snapshot_manager.latest_id(), mode
        return self._bound(self._given(self.start)), self._bound(end), mode

    def _table(self) -> Table:
        try:
            return self.paimon_hook().get_table(str(self.table))
        except PaimonError as exc:
            raise task_failure(exc) from exc

    def execute(self, context: Context) -> Any:
        """Plan the range here (metadata only), write it in the worker or on Spark (see the class), then advance
        the consumer."""
        table = self._table()
        consumer = self._given(self.consumer_id)
        folder = str(self.path).rstrip("/")
        try:
            start, end, mode = self._range(table, context)
            columns = list(self.columns) if self.columns is not None else None
            plan = plan_changes(table, start, end, columns=columns, mode=mode, consumer_id=consumer)
        except PaimonError as exc:
            raise task_failure(exc) from exc
        engine, reason = self._choose(plan)
        self.log.info("Export of %s (%s, mode %s) %s: %s", table.identifier, f"({start}, {end}]", mode,
                      "in the worker's process" if engine == "local" else "on Spark", reason)
        self._export_range = (start, end, mode, columns)
        if engine == "local":
            result = self._write_here(table, plan, folder, start, end, mode, consumer)
        else:
            result = dict(super().execute(context))
        result["engine_reason"] = reason
        if consumer is not None and end is not None:
            try:
                current = table.consumers.require(consumer)
                if end + 1 > current:
                    table.consumers.advance(consumer, end + 1)
            except PaimonError as exc:
                raise task_failure(exc) from exc
            self.log.info("Consumer %r of %s advanced to snapshot %d", consumer, table.identifier, end + 1)
        self.log.info("Exported %d changed row(s) of %s (%s, mode %s) to %s in %d file(s) (engine %s): %s",
                      result["rows"], table.identifier, f"({result['start']}, {end}]", mode, folder,
                      len(result["files"]), result["engine"],
                      ", ".join(f"{kind}={n}" for kind, n in result["counts"].items()) or "no rows")
        return result

    def _choose(self, plan: ChangePlan) -> tuple[str, str]:
        """(engine, why): `engine` as asked, or for ``auto`` by the decoded size of the files the range reads."""
        if self.engine in ("local", "spark"):
            return str(self.engine), f"engine={self.engine!r}"
        budget = args.whole_number(self.memory_budget, "memory_budget", minimum=0)
        size = (f"the range reads about {plan.read_bytes / (1 << 20):.1f} MiB decoded, for a "
                f"{budget / (1 << 20):.0f} MiB budget")
        if plan.read_bytes > budget:
            return "spark", f"too large for the worker: {size}"
        return "local", f"fits in the worker: {size}"

    def _write_here(self, table: Table, plan: ChangePlan, folder: str, start: Any, end: Any, mode: str,
                    consumer: str | None) -> dict[str, Any]:
        io = FileIO(folder, self.paimon_hook().options)
        try:
            reader = plan.reader(table)
            clear_folder(io, folder)
        except PaimonError as exc:
            raise task_failure(exc) from exc
        writer = PartWriter(io, folder, reader.schema,
                            args.whole_number(self.max_rows_per_file, "max_rows_per_file", minimum=1))
        try:
            writer.write(reader)
        finally:
            writer.close()
        result = manifest(table=table.identifier, folder=folder, start=start, end=end, mode=mode,
                          files=writer.files, counts=writer.counts, consumer=consumer, engine="local")
        finish_folder(io, folder, result)
        return result

    def build_spec(self, context: Context) -> dict[str, Any]:
        """The Spark application's arguments: the range as the worker resolved it (a consumer's end pinned)."""
        assert self._export_range is not None, "execute() resolves the range first"
        start, end, mode, columns = self._export_range
        consumer = self._given(self.consumer_id)
        spec: dict[str, Any] = {
            "target": self.table, "path": str(self.path).rstrip("/"), "mode": mode,
            "start": None if consumer is not None else _json_bound(start), "end": _json_bound(end),
            "max_rows_per_file": args.whole_number(self.max_rows_per_file, "max_rows_per_file", minimum=1),
        }
        if consumer is not None:
            spec["consumer_id"] = consumer
        if columns is not None:
            spec["columns"] = columns
        return spec

    def collect_result(self, context: Context, spec: dict[str, Any], printed: dict[str, Any] | None) -> Any:
        """The XCom of the worker's shape, from the manifest the application wrote (and returned)."""
        if not printed or "files" not in printed:
            raise task_failure(InvalidOptionError(
                f"{self.app_name}.py finished without its result; the folder {spec['path']} has no manifest "
                "unless it completed: retry the task (it replaces the folder)"))
        assert self._export_range is not None
        start, end, mode, _ = self._export_range
        return manifest(table=str(printed.get("table") or self.table), folder=spec["path"], start=start, end=end,
                        mode=mode, files=[(f["path"], int(f["rows"])) for f in printed["files"]],
                        counts=printed["counts"], consumer=spec.get("consumer_id"), engine="spark")

    def lineage(self, result: Mapping[str, Any] | None) -> tuple[list[LineageDataset], list[LineageDataset]]:
        """The table's changes in (at the range's end), the export folder out, with its rows and files."""
        table = self.lineage_table()
        end = (result or {}).get("end")
        source = table_dataset(self.paimon_hook().warehouse, table, end if isinstance(end, int) else None)
        namespace, name = path_dataset(str(self.path).rstrip("/"))
        folder = LineageDataset(namespace, name)
        if result:
            folder.rows = int(result.get("rows", 0))
            folder.files = len(result.get("files", ()))
        return [source], [folder]


def _previous_period_start(table: Table, run: TagPlan) -> Any:
    """Where the run's period starts: the previous period's tag, or while that tag does not exist yet (a backfill
    running periods out of order) the snapshot it will hold, so that each period exports its own changes in
    whatever order the runs go. None when neither is known (no snapshot before that tag was due: the table's
    first period; a period Paimon's auto-tagging leaves untagged; an expired snapshot): then Paimon's
    ``incremental-to-auto-tag`` rule, the nearest earlier periodic tag."""
    previous = run.spec.previous(run.period)
    name = run.spec.tag_name(previous)
    if table.tags.exists(name):
        return name
    try:
        planned = plan_period_tag(table, run.spec, previous, run.now)
    except PaimonError:
        return None
    return planned.snapshot.id if planned.status == READY and planned.snapshot is not None else None


def _json_bound(value: Any) -> Any:
    """A bound as the application's JSON spec carries it: ids and tag names as they are, a time as ISO text."""
    return value.isoformat() if isinstance(value, (dt.datetime, dt.date)) else value
