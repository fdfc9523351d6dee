"""MergeIncrementalOperator: MERGE an increment into a Paimon primary-key table with a Spark application.

The operator is a :class:`~airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator` whose
application is the merge app shipped inside this package (``airflow_paimon/spark/merge_app.py``): users keep
the Spark provider's connection (``conn_id``), ``conf``, log streaming, kill and cluster support.

What it adds:

* the warehouse and filesystem options come from the Paimon connection (``paimon_conn_id``, via
  :class:`~airflow_paimon.hooks.paimon.PaimonHook`). They never go on the spark-submit command line, where ``ps``
  and the cluster's application listings would show them: the job's spec travels in a file only the job can read
  (mode 0600 in a private temporary folder, deleted when spark-submit ends; on YARN in cluster mode shipped with
  ``--files`` into the application's private staging folder), and on Kubernetes in cluster mode the secret
  options come from a Kubernetes secret (``spark.kubernetes.driver.secretKeyRef.AIRFLOW_PAIMON_CATALOG_OPTIONS``).
  Spark cannot run Python applications on a standalone cluster in cluster deploy mode; that mode is refused;
* an input the application refuses (a missing folder or column, duplicate keys, a clause that does not parse, a
  type the MERGE may not store) fails the task without retries (``AirflowFailException``) with the
  application's own one-line error; crashes and killed JVMs stay retryable;
* exactly-once: the commit user is ``airflow:<dag_id>.<task_id>`` and the commit identifier a stable int64 hash
  of the dag id, task id, map index and the run's data interval, so a retry (or a backfill re-run) of a merge
  whose commit already landed does nothing. ``reapply=True`` merges again on purpose, under an identifier of
  the run and try (so a later run re-applying the same day merges again, and a retried try does not);
* with no Spark connection at all, ``local[*]`` with the worker's own Python (``sys.executable``): nothing to
  configure. For a cluster (``yarn``, ``spark://``, ``k8s://``), the installed ``airflow_paimon`` package is
  zipped and shipped with ``--py-files`` (``ship_package``), so executors import the same library; they need
  pyarrow, numpy and fastavro in their Python (``spark.pyspark.python``).

No Airflow import is needed by the Spark side: the application only imports ``airflow_paimon.spark`` and
``airflow_paimon.format``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from airflow_paimon import arguments as args
from airflow_paimon.format import values
from airflow_paimon.merge import SOURCE_FORMATS, MergeClause, parse_clauses
from airflow_paimon.operators.checked import CheckedArguments, checkable
from airflow_paimon.spark.common import (
    INPUT_ERROR_EXIT,
    OPTIONS_ENV,
    application_path,
    parse_result,
    py_files_zip,
    read_result_file,
    reapply_identifier,
    stable_int64,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["MergeIncrementalOperator", "PaimonSparkSubmitOperator", "commit_identifier_for", "commit_user_for",
           "reapply_token_for"]

DEFAULT_LOCAL_MASTER = "local[*]"
SPEC_FILE_NAME = "airflow-paimon-spec.json"
# The conf that hands the driver pod the catalog options from a Kubernetes secret.
KUBERNETES_OPTIONS_SECRET_CONF = f"spark.kubernetes.driver.secretKeyRef.{OPTIONS_ENV}"
# How YARN (cluster mode) and Kubernetes report the driver's exit code in spark-submit's output.
_REMOTE_EXIT_RE = re.compile(r"(?:User application exited with status|[eE]xit code:)\s*(\d+)")


def commit_user_for(dag_id: str, task_id: str) -> str:
    return f"airflow:{dag_id}.{task_id}"


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def commit_identifier_for(context: Mapping[str, Any], purpose: str = "merge") -> int:
    """A stable int64 for this task of this run: dag id, task id, map index and the data interval (the run id
    when the run has no data interval)."""
    ti = context["ti"]
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None:
        anchor = ("run", context.get("run_id") or getattr(context.get("dag_run"), "run_id", ""))
    else:
        anchor = ("interval", _iso(start), _iso(end))
    return stable_int64(purpose, ti.dag_id, ti.task_id, getattr(ti, "map_index", -1), *anchor)


def reapply_token_for(context: Mapping[str, Any]) -> str:
    """What makes a deliberate re-merge distinct: the run and the try. A later run re-applying the same day
    gets a new commit identifier (and merges what the day's files hold now); the same try run again finds its
    own commit and does nothing."""
    ti = context["ti"]
    run_id = context.get("run_id") or getattr(ti, "run_id", None) or getattr(context.get("dag_run"), "run_id", "")
    return f"{run_id}/{getattr(ti, 'try_number', 1)}"


class _PaimonSparkSubmitHook(SparkSubmitHook):
    """The Spark provider's hook, except that a missing Spark connection means ``local[*]``, not yarn."""

    def _resolve_connection(self) -> dict[str, Any]:
        missing = False
        try:
            self.get_connection(self._conn_id)
        except (AirflowNotFoundException, AirflowException):
            missing = True
        conn = super()._resolve_connection()
        if missing:
            self.log.info("No Spark connection %r: running Spark locally (%s)", self._conn_id, DEFAULT_LOCAL_MASTER)
            conn["master"] = DEFAULT_LOCAL_MASTER
        return conn


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


class PaimonSparkSubmitOperator(CheckedArguments, SparkSubmitOperator):
    """Base of the operators that submit one of this package's Spark applications.

    :param paimon_conn_id: the Paimon connection (warehouse and filesystem options) (templated).
    :param ship_package: send the installed ``airflow_paimon`` package as a ``--py-files`` zip; default: only
        when the Spark master is not ``local``/``local[N]``.
    """

    app_name = ""
    template_fields: Sequence[str] = tuple(SparkSubmitOperator.template_fields) + ("paimon_conn_id",)

    def __init__(self, *, paimon_conn_id: str = "paimon_default", ship_package: bool | None = None,
                 **kwargs: Any) -> None:
        if "application" in kwargs:
            raise TypeError(f"{type(self).__name__} runs its own application; do not pass application=")
        kwargs.setdefault("name", f"paimon-{self.app_name.replace('_app', '')}")
        super().__init__(application=application_path(self.app_name), **kwargs)
        self.paimon_conn_id = paimon_conn_id
        self.ship_package = ship_package

    def check_arguments(self, rendered: bool) -> None:
        if not rendered and not isinstance(self.paimon_conn_id, str):
            raise args.ArgumentError(f"paimon_conn_id: expected a connection id, not {self.paimon_conn_id!r}")
        if self.ship_package is not None:
            args.flag(self.ship_package, "ship_package")

    # -- to be filled in by subclasses ---------------------------------------------------------------
    def build_spec(self, context: Context) -> dict[str, Any]:
        raise NotImplementedError

    # -- submission ------------------------------------------------------------------------------------
    def _get_hook(self) -> SparkSubmitHook:
        hook = super()._get_hook()
        if type(hook) is SparkSubmitHook:  # rebuild it as our subclass with the same arguments
            hook.__class__ = _PaimonSparkSubmitHook
            hook._connection = hook._resolve_connection()
            hook._is_yarn = "yarn" in hook._connection["master"]
            hook._is_yarn_cluster_mode = hook._is_yarn and hook._connection["deploy_mode"] == "cluster"
            hook._is_kubernetes = "k8s" in hook._connection["master"]
            hook._should_track_driver_status = hook._resolve_should_track_driver_status()
        return hook

    def paimon_hook(self) -> Any:
        from airflow_paimon.hooks.paimon import PaimonHook

        return PaimonHook(paimon_conn_id=self.paimon_conn_id)

    def _prepare(self, context: Context) -> dict[str, Any]:
        """Fill in the application's arguments, environment, conf and py-files; returns the spec sent.

        The spec (with the warehouse and its filesystem options, which may hold secrets) goes into a file that
        only this job reads; the command line carries its path. Only on Kubernetes in cluster mode, where no
        local file reaches the driver pod, the spec is an argument -- without the secret options, which the pod
        takes from a Kubernetes secret."""
        paimon = self.paimon_hook()
        spec = self.build_spec(context)
        spec["warehouse"] = paimon.warehouse
        options = dict(paimon.options)
        probe = self._get_hook()
        master = probe._connection["master"]
        cluster = probe._connection.get("deploy_mode") == "cluster"
        if cluster and not (probe._is_yarn or probe._is_kubernetes):
            raise AirflowFailException(
                f"Spark connection {self._conn_id!r}: Spark cannot run Python applications on a standalone cluster "
                f"({master}) in cluster deploy mode. Use client deploy mode (remove deploy-mode from the "
                "connection's extra, or pass deploy_mode='client'), or a YARN or Kubernetes cluster.")
        self.conf = dict(self.conf or {})
        env = dict(self.env_vars or {})
        if _is_local(master) or master.startswith("local-cluster"):
            # The worker's own Python and (if not on PATH) its spark-submit.
            self.conf.setdefault("spark.pyspark.python", sys.executable)
            self.conf.setdefault("spark.pyspark.driver.python", sys.executable)
            env.setdefault("PYSPARK_PYTHON", sys.executable)
            env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            binary = probe._connection.get("spark_binary") or "spark-submit"
            here = Path(sys.executable).parent
            if shutil.which(binary) is None and (here / binary).exists():
                env["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"
        ship = self.ship_package if self.ship_package is not None else not _is_local(master)
        if ship:
            zipped = py_files_zip()
            self.py_files = f"{self.py_files},{zipped}" if self.py_files else zipped
        self.env_vars = env or None
        self._remove_spec_dir()
        if cluster and probe._is_kubernetes:
            sent = self._kubernetes_spec(spec, options, paimon.secret_option_names)
            self.application_args = ["--spec", json.dumps(sent, default=str)]
        else:
            self._spec_dir = tempfile.mkdtemp(prefix="airflow-paimon-")   # mode 0700
            path = os.path.join(self._spec_dir, SPEC_FILE_NAME)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                json.dump(dict(spec, options=options) if options else spec, f, default=str)
            if cluster:  # YARN: shipped into the application's staging folder (mode 0700, removed at its end)
                self.files = f"{self.files},{path}" if self.files else path
                self.application_args = ["--spec-file", SPEC_FILE_NAME]
            else:  # the driver runs here: it reads the file and writes its result beside it
                self._result_file = os.path.join(self._spec_dir, "result.json")
                self.application_args = ["--spec-file", path, "--result-file", self._result_file]
        self._hook = None  # built again by execute() with the arguments above
        return spec

    def _kubernetes_spec(self, spec: dict[str, Any], options: Mapping[str, str],
                         secret_names: Sequence[str]) -> dict[str, Any]:
        """The spec sent as an argument to a driver pod: the options that are no secret; the others must come
        from a Kubernetes secret named in the conf."""
        secrets = sorted(k for k in options if k in set(secret_names))
        if secrets and KUBERNETES_OPTIONS_SECRET_CONF not in self.conf:
            raise AirflowFailException(
                f"The Paimon connection {self.paimon_conn_id!r} holds secrets ({', '.join(secrets)}), which are never "
                "put on a spark-submit command line. On Kubernetes in cluster mode the driver pod takes them from a "
                "Kubernetes secret: store the options as JSON in one (e.g. kubectl create secret generic "
                "paimon-options --from-literal=options='{\"s3.secret-key\": \"...\"}') and pass "
                f"conf={{'{KUBERNETES_OPTIONS_SECRET_CONF}': 'paimon-options:options'}}; or use client deploy mode.")
        public = {k: v for k, v in options.items() if k not in secrets}
        return dict(spec, options=public) if public else spec

    def _remove_spec_dir(self) -> None:
        spec_dir = getattr(self, "_spec_dir", None)
        if spec_dir:
            shutil.rmtree(spec_dir, ignore_errors=True)
        self._spec_dir: str | None = None
        self._result_file: str | None = None

    def execute(self, context: Context) -> Any:
        spec = self._prepare(context)
        try:
            self.log.info("Submitting %s for %s", Path(self.application).name, spec.get("target"))
            try:
                super().execute(context)
            except AirflowException as e:
                refused = self._refused_input()
                if refused is not None:
                    raise AirflowFailException(refused) from e
                raise
            return self.collect_result(context, spec)
        finally:
            self._remove_spec_dir()

    def _app_result(self) -> dict[str, Any] | None:
        """The application's result: from its result file when the driver ran here, else from the output."""
        if self._result_file:
            found = read_result_file(self._result_file)
            if found is not None:
                return found
        return parse_result(getattr(self._hook, "_last_submit_log_lines", None) or [])

    def _refused_input(self) -> str | None:
        """The application's own error when it refused its input (running it again cannot help), else None."""
        result = self._app_result() or {}
        hook = self._hook
        process = getattr(hook, "_submit_sp", None)
        codes = {getattr(process, "returncode", None), getattr(hook, "_spark_exit_code", None)}
        for line in getattr(hook, "_last_submit_log_lines", None) or []:
            found = _REMOTE_EXIT_RE.search(str(line))
            if found:
                codes.add(int(found.group(1)))
        if result.get("status") == "failed" and result.get("error"):
            return (f"{result['error']} [{Path(self.application).name} refused its input; the task is not "
                    "retried]")
        if INPUT_ERROR_EXIT in codes:
            return (f"{Path(self.application).name} refused its input (exit code {INPUT_ERROR_EXIT}); its ERROR "
                    "line is in the driver's log. The task is not retried.")
        return None

    def collect_result(self, context: Context, spec: dict[str, Any]) -> Any:
        return self._app_result()

    def committed_result(self, spec: dict[str, Any], identifier: int, printed: dict[str, Any],
                         keys: Sequence[str]) -> dict[str, Any]:
        """The XCom of an application that commits once: its printed `keys`, with the snapshot read back from
        the table, which holds the truth even when the output was lost (a retry after the commit landed)."""
        from airflow_paimon.format.commit import CommitId

        result = {"target": spec["target"], "commit_user": spec["commit_user"], "commit_identifier": identifier}
        result.update({k: v for k, v in printed.items() if k in keys})
        try:
            snap = self.paimon_hook().get_table(spec["target"]).find_commit(
                CommitId(spec["commit_user"], identifier))
        except Exception as e:  # noqa: BLE001 - the job itself succeeded; the lookup is informational
            self.log.warning("Could not look up the snapshot of %s/%s: %s", spec["commit_user"], identifier, e)
            return result
        if snap is not None:
            result["snapshot_id"] = snap.id
            result.setdefault("status", "committed")
        else:
            result.setdefault("status", "no_changes")
        self.log.info("%s into %s: %s (snapshot %s)", type(self).__name__, spec["target"], result["status"],
                      result.get("snapshot_id"))
        return result


class MergeIncrementalOperator(PaimonSparkSubmitOperator):
    """MERGE a source (files, a Paimon table or its changes between two snapshots/tags, or a SQL query) into a
    Paimon primary-key table, on Spark, exactly once per run.

    :param target: the target table, ``database.table`` (templated).
    :param source: what to merge (templated): a path/URI of files (read with ``source_format``), a table
        identifier (``source_format="paimon"``), a query (``source_format="sql"``), or a mapping
        ``{"path"|"table"|"sql": ..., ...}``; for a table: ``snapshot_id``/``tag``/``as_of`` (the rows at that
        point) and ``from_snapshot_id``/``from_tag``/``from_as_of`` (only the rows that differ from that point,
        with a ``_change`` column of ``+I``/``+U``/``-D``); an ``as_of`` whose snapshot expired fails naming the
        closest tag unless ``"closest_tag": True`` asks to read that tag.
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
    :param paimon_conn_id: the Paimon connection (templated).
    :param ship_package: see :class:`PaimonSparkSubmitOperator`.

    Every other keyword goes to ``SparkSubmitOperator`` (``conn_id`` -- default ``spark_default``; without that
    connection Spark runs ``local[*]`` --, ``conf``, ``executor_memory``, ``py_files``, ...). For a cluster the
    package is shipped with ``--py-files`` as a zip built from the installed ``airflow_paimon`` (cached in the
    temp directory by content hash); the cluster's Python needs pyarrow, numpy and fastavro.

    Returns (XCom) ``{"status", "snapshot_id", "commit_user", "commit_identifier", ...}``: ``committed`` with
    the new snapshot, ``already_committed`` with the snapshot holding the commit, or ``no_changes`` with the
    latest snapshot (also for an increment folder without data files: a day without changes).

    Checked when the DAG is parsed (templated values once rendered): ``target`` (``database.table``),
    ``source_format``, ``on`` (column names, each once), ``clauses`` (shape; no clause after an unconditional
    one of the same kind; every condition and expression parses as Spark SQL; an insert with explicit values
    sets every ``on`` column), ``reapply``, ``driver_bytes`` (>= 0). Column names are checked against the
    tables at run time.
    """

    app_name = "merge_app"
    template_fields: Sequence[str] = tuple(PaimonSparkSubmitOperator.template_fields) + (
        "target", "source", "source_format", "on", "clauses", "reapply",
    )
    template_fields_renderers = {"clauses": "json", "source": "json"}

    def __init__(self, *, target: str, source: Any, source_format: str = "parquet", on: Any = None,
                 clauses: Sequence[MergeClause | Mapping[str, Any]] | str | None = None, reapply: Any = False,
                 driver_bytes: int | None = None, paimon_conn_id: str = "paimon_default", **kwargs: Any) -> None:
        super().__init__(paimon_conn_id=paimon_conn_id, **kwargs)
        self.target = target
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
        self.check_arguments_at_parse_time()

    def check_arguments(self, rendered: bool) -> None:
        super().check_arguments(rendered)
        if checkable(self.target, rendered) or self.target is None:
            args.table_identifier(self.target, "target")
        if checkable(self.source_format, rendered):
            # Spark reads the format name in any case ('CSV' is 'csv').
            text = self.source_format.lower() if isinstance(self.source_format, str) else self.source_format
            args.one_of(text, "source_format", SOURCE_FORMATS)
        if self.source is None or (isinstance(self.source, str) and rendered and not self.source.strip()):
            raise args.ArgumentError("source: give the files, table or query to merge")
        on = args.merge_on(self.on) if checkable(self.on, rendered) and self.on != [] else None
        if checkable(self.clauses, rendered):
            args.merge_clauses(self.clauses, "clauses", on)
        if checkable(self.reapply, rendered):
            args.flag(self.reapply, "reapply", rendered=True)
        if self.driver_bytes is not None:
            args.whole_number(self.driver_bytes, "driver_bytes", minimum=0)

    def build_spec(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        self._commit_user = commit_user_for(ti.dag_id, ti.task_id)
        self._commit_identifier = commit_identifier_for(context, "merge")
        spec: dict[str, Any] = {
            "target": self.target,
            "source": self.source,
            "source_format": self.source_format or "parquet",
            "on": self.on,
            "clauses": self.clauses,
            "commit_user": self._commit_user,
            "commit_identifier": self._commit_identifier,
        }
        if self.driver_bytes is not None:
            spec["driver_bytes"] = args.whole_number(self.driver_bytes, "driver_bytes", minimum=0)
        if values.boolean(self.reapply, "reapply", default=False):
            spec["reapply"] = True
            spec["reapply_token"] = reapply_token_for(context)
        return spec

    def collect_result(self, context: Context, spec: dict[str, Any]) -> Any:
        printed = super().collect_result(context, spec) or {}
        ident = spec["commit_identifier"]
        if spec.get("reapply"):
            ident = reapply_identifier(ident, spec["reapply_token"])
        return self.committed_result(spec, ident, printed, ("status", "rows", "mode", "engine", "snapshot_id"))
