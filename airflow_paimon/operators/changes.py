"""ExportChangesOperator: write a run's change feed (``table.changes``) as Parquet files in a folder of its own.

Thin: which rows changed, in which mode, between which snapshots is the format library's change feed; the range of
a run's period is the library's ``incremental-to-auto-tag`` resolution. The operator owns only the folder: its
files, its completion marker and when a consumer moves.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_paimon import arguments as args
from airflow_paimon.format.changes import MODES, request_from_options
from airflow_paimon.format.consumers import check_consumer_id
from airflow_paimon.format.errors import InvalidOptionError, PaimonError
from airflow_paimon.format.fileio import FileIO
from airflow_paimon.hooks.paimon import PaimonHook
from airflow_paimon.lineage import LineageDataset, path_dataset, table_dataset
from airflow_paimon.operators.checked import checkable
from airflow_paimon.operators.failures import task_failure
from airflow_paimon.operators.runs import plan_run
from airflow_paimon.operators.tags import PaimonTableOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_paimon.format import Table

__all__ = ["MARKER", "ExportChangesOperator"]

MARKER = "_SUCCESS"
"""The last file of a complete export: a JSON manifest of its data files and row counts."""

_PART = "part-{:05d}.parquet"


def _is_own_file(name: str) -> bool:
    return name == MARKER or (name.startswith("part-") and name.endswith(".parquet"))


class ExportChangesOperator(PaimonTableOperator):
    """Write the rows that changed in a table over one range as Parquet files in the folder ``path``.

    The range is exactly one of:

    * ``period=True``: the run's period, from the nearest earlier periodic tag to the run's periodic tag (Paimon's
      ``incremental-to-auto-tag``, a diff by default). The run's tag must exist (create it upstream with
      :class:`~airflow_paimon.operators.tags.CreateTagOperator`); with no earlier periodic tag the export is empty,
      as Paimon's answer is.
    * ``start`` (exclusive) and optionally ``end`` (inclusive, default: the latest snapshot): snapshot ids, tag
      names or times.
    * ``consumer_id``: from that consumer's position to the latest snapshot when the task starts. The consumer is
      advanced past that snapshot only once the folder is complete, so a run that fails reads the same range again.

    The folder is complete when its ``_SUCCESS`` file exists: data files (``part-NNNNN.parquet``) are written
    first, the marker last, as a JSON manifest listing each file with its row count, the range and the counts by
    ``_change_type``. Readers read a folder only once its marker is there (Spark's and Hadoop's convention), and
    may take the file list from the manifest.

    A re-run replaces the folder: the marker goes first (the folder reads as incomplete from then on), then every
    file an earlier attempt left, then the new files are written and the marker last. A temporary sibling folder
    renamed over the old one is not used because object stores have no rename (it would be a copy, not atomic);
    deleting the marker first gives the same guarantee everywhere: whenever a marker exists, the folder holds
    exactly the files it lists. A folder holding anything this operator does not write (other files, subfolders)
    is refused before anything is deleted.

    Batches are written as they are read, so memory holds one batch, never the range.

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
    :param paimon_conn_id: the Paimon connection (templated).

    Returns (XCom) ``{"table", "path", "start", "end", "mode", "rows", "counts", "files", "consumer"}``;
    ``counts`` maps each ``_change_type`` to its rows, and the log says the same.

    Checked when the DAG is parsed: ``table``; exactly one of ``period``, ``start`` and ``consumer_id``; ``end``
    only with ``start``; ``consumer_id`` (Paimon's file-name rule); ``mode``; ``columns`` (names);
    ``max_rows_per_file`` (>= 1); ``path`` given; templated ones once rendered.
    """

    template_fields: Sequence[str] = ("table", "paimon_conn_id", "path", "start", "end", "consumer_id",
                                      "max_rows_per_file")

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
        paimon_conn_id: str = PaimonHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, paimon_conn_id=paimon_conn_id, **kwargs)
        self.path = path
        self.period = period
        self.start = start
        self.end = end
        self.consumer_id = consumer_id
        self.mode = mode
        self.columns = columns
        self.max_rows_per_file = max_rows_per_file
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
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
            tag = plan_run(table, context).name
            if not table.tags.exists(tag):
                raise InvalidOptionError(f"the run's periodic tag {tag!r} does not exist on {table.identifier}: "
                                         "create it first (CreateTagOperator upstream of this task)")
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

    def execute(self, context: Context) -> dict[str, Any]:
        table = self.get_table()
        consumer = self._given(self.consumer_id)
        folder = str(self.path).rstrip("/")
        io = FileIO(folder, self.hook.options)
        try:
            start, end, mode = self._range(table, context)
            columns = list(self.columns) if self.columns is not None else None
            reader = table.changes(start, end, columns=columns, mode=mode, consumer_id=consumer)
        except PaimonError as exc:
            raise task_failure(exc) from exc
        self._clear(io, folder)
        max_rows = args.whole_number(self.max_rows_per_file, "max_rows_per_file", minimum=1)
        files, counts = self._write(io, folder, reader, max_rows)
        total = sum(rows for _, rows in files)
        result: dict[str, Any] = {
            "table": table.identifier,
            "path": folder,
            "start": start if consumer is None else f"consumer {consumer}",
            "end": end,
            "mode": mode,
            "rows": total,
            "counts": dict(sorted(counts.items())),
            "files": [{"path": name, "rows": rows} for name, rows in files],
            "consumer": consumer,
        }
        io.write_bytes(f"{folder}/{MARKER}", json.dumps(result, default=str, indent=1).encode())
        if consumer is not None and end is not None:
            try:
                current = table.consumers.require(consumer)
                if end + 1 > current:
                    table.consumers.advance(consumer, end + 1)
            except PaimonError as exc:
                raise task_failure(exc) from exc
            self.log.info("Consumer %r of %s advanced to snapshot %d", consumer, table.identifier, end + 1)
        self.log.info("Exported %d changed row(s) of %s (%s, mode %s) to %s in %d file(s): %s", total,
                      table.identifier, f"({result['start']}, {end}]", mode, folder, len(files),
                      ", ".join(f"{kind}={n}" for kind, n in result["counts"].items()) or "no rows")
        return result

    def lineage(self, result: Mapping[str, Any] | None) -> tuple[list[LineageDataset], list[LineageDataset]]:
        """The table's changes in (at the range's end), the export folder out, with its rows and files."""
        table = self.lineage_table()
        end = (result or {}).get("end")
        source = table_dataset(self.hook.warehouse, table, end if isinstance(end, int) else None)
        namespace, name = path_dataset(str(self.path).rstrip("/"))
        folder = LineageDataset(namespace, name)
        if result:
            folder.rows = int(result.get("rows", 0))
            folder.files = len(result.get("files", ()))
        return [source], [folder]

    def _clear(self, io: FileIO, folder: str) -> None:
        """Empty the folder of an earlier attempt, the marker first; refuse a folder that is not an export's."""
        foreign = [info.path.rsplit("/", 1)[-1] for info in io.list_dir(folder)
                   if not _is_own_file(info.path.rsplit("/", 1)[-1])]
        foreign += [f"{name}/" for name in io.list_subdirs(folder)]
        if foreign:
            raise task_failure(InvalidOptionError(
                f"path: {folder} holds {', '.join(sorted(foreign)[:5])}, which an export does not write; give each "
                "run an export folder of its own"))
        io.delete(f"{folder}/{MARKER}")
        for info in io.list_dir(folder):
            io.delete(info.path)
        io.mkdirs(folder)

    @staticmethod
    def _write(io: FileIO, folder: str, reader: pa.RecordBatchReader,
               max_rows: int) -> tuple[list[tuple[str, int]], Counter[str]]:
        """Stream the reader into Parquet files of at most ``max_rows`` rows (at least one file, for the schema)."""
        files: list[tuple[str, int]] = []
        counts: Counter[str] = Counter()
        writer: pq.ParquetWriter | None = None
        for batch in _slices(reader, max_rows):
            if writer is None or files[-1][1] + batch.num_rows > max_rows:
                if writer is not None:
                    writer.close()
                name = _PART.format(len(files))
                writer = pq.ParquetWriter(io.fs_path(f"{folder}/{name}"), reader.schema, filesystem=io.fs)
                files.append((name, 0))
            writer.write_batch(batch)
            files[-1] = (files[-1][0], files[-1][1] + batch.num_rows)
            kinds = pc.value_counts(batch.column("_change_type"))
            counts.update(dict(zip(map(str, kinds.field("values").to_pylist()), kinds.field("counts").to_pylist())))
        if writer is None:
            name = _PART.format(0)
            pq.write_table(reader.schema.empty_table(), io.fs_path(f"{folder}/{name}"), filesystem=io.fs)
            files.append((name, 0))
        else:
            writer.close()
        return files, counts


def _slices(reader: pa.RecordBatchReader, max_rows: int) -> Iterable[pa.RecordBatch]:
    """The reader's non-empty batches, none longer than ``max_rows`` (so a file never exceeds it)."""
    for batch in reader:
        for offset in range(0, batch.num_rows, max_rows):
            yield batch.slice(offset, max_rows)
