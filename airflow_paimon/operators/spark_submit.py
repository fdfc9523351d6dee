"""PaimonSparkSubmitOperator: the base of the operators that submit one of this package's Spark applications.

It is the Spark provider's :class:`~airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator`
(users keep the Spark connection ``conn_id``, ``conf``, log streaming, kill and cluster support) whose hook is a
:class:`~airflow_paimon.hooks.spark_submit.PaimonSparkSubmitHook` built from the operator's arguments, as the
provider builds its own. What it adds:

* the warehouse and filesystem options come from the Paimon connection (``paimon_conn_id``, via
  :class:`~airflow_paimon.hooks.paimon.PaimonHook`). They never go on the spark-submit command line, where ``ps``
  and the cluster's application listings would show them: the job's spec travels in a file only the job can read
  (mode 0600 in a private temporary folder, deleted when spark-submit ends; on YARN in cluster mode shipped with
  ``--files`` into the application's private staging folder), and on Kubernetes in cluster mode the secret
  options come from a Kubernetes secret (``spark.kubernetes.driver.secretKeyRef.AIRFLOW_PAIMON_CATALOG_OPTIONS``).
  Spark cannot run Python applications on a standalone cluster in cluster deploy mode; that mode is refused;
* the application's result comes from a result file it writes (``--result-file``): beside the spec when the
  driver runs here (local and client deploy mode); in cluster deploy mode, where the driver runs on the cluster,
  under the warehouse (``<warehouse>/.airflow-paimon/results/``, written with the job's own filesystem options
  and deleted once read). Applications that commit are read back from the table too (their snapshot), which
  holds the truth even when the result file is lost;
* an input the application refuses (its result says ``failed``) fails the task without retries
  (``AirflowFailException``) with the application's own one-line error; crashes and killed JVMs stay retryable;
* with no Spark connection at all, ``local[*]`` with the worker's own Python (``sys.executable``). For a
  cluster (``yarn``, ``spark://``, ``k8s://``), the installed ``airflow_paimon`` package is zipped and shipped
  with ``--py-files`` (``ship_package``), so executors import the same library; they need pyarrow, numpy and
  fastavro in their Python (``spark.pyspark.python``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_paimon import arguments as args
from airflow_paimon.hooks.spark_submit import PaimonSparkSubmitHook
from airflow_paimon.operators.checked import CheckedArguments
from airflow_paimon.operators.lineage import PaimonLineage
from airflow_paimon.spark.common import (
    OPTIONS_ENV,
    application_path,
    py_files_zip,
    read_result_file,
    remove_result_file,
    stable_int64,
)
from airflow_paimon.ui.links import PaimonTableLink

try:
    from airflow.exceptions import AirflowProviderDeprecationWarning as _Deprecated
except ImportError:  # pragma: no cover - every Airflow this provider supports has it
    _Deprecated = DeprecationWarning  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_paimon.hooks.paimon import PaimonHook

__all__ = ["PaimonSparkSubmitOperator", "commit_identifier_for", "commit_identifier_of", "commit_user_for",
           "reapply_token_for", "table_or_target"]

SPEC_FILE_NAME = "airflow-paimon-spec.json"
RESULTS_FOLDER = ".airflow-paimon/results"
# The conf that hands the driver pod the catalog options from a Kubernetes secret.
KUBERNETES_OPTIONS_SECRET_CONF = f"spark.kubernetes.driver.secretKeyRef.{OPTIONS_ENV}"


def commit_user_for(dag_id: str, task_id: str) -> str:
    return f"airflow:{dag_id}.{task_id}"


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def commit_identifier_for(context: Mapping[str, Any], purpose: str = "merge") -> int:
    """A stable int64 for this task of this run: dag id, task id, map index and the data interval (the run id
    when the run has no data interval)."""
    ti = context["ti"]
    return commit_identifier_of(purpose, ti.dag_id, ti.task_id, getattr(ti, "map_index", -1),
                                context.get("data_interval_start"), context.get("data_interval_end"),
                                str(context.get("run_id") or getattr(context.get("dag_run"), "run_id", "")))


def commit_identifier_of(purpose: str, dag_id: str, task_id: str, map_index: int, data_interval_start: Any,
                         data_interval_end: Any, run_id: str) -> int:
    """The commit identifier of one task of one run, from the run's stored fields: the tables view finds the run
    that made a snapshot with it."""
    anchor: tuple[str, ...]
    if data_interval_start is None or data_interval_end is None:
        anchor = ("run", run_id)
    else:
        anchor = ("interval", _iso(data_interval_start), _iso(data_interval_end))
    return stable_int64(purpose, dag_id, task_id, map_index, *anchor)


def _run_id(context: Mapping[str, Any]) -> str:
    ti = context["ti"]
    return str(context.get("run_id") or getattr(ti, "run_id", None) or getattr(context.get("dag_run"), "run_id", ""))


def reapply_token_for(context: Mapping[str, Any]) -> str:
    """What makes a deliberate re-merge distinct: the run and the try. A later run re-applying the same day
    gets a new commit identifier (and merges what the day's files hold now); the same try run again finds its
    own commit and does nothing."""
    return f"{_run_id(context)}/{getattr(context['ti'], 'try_number', 1)}"


def table_or_target(operator: str, table: str | None, target: str | None) -> str | None:
    """The table argument, given as ``table`` or as its deprecated name ``target`` (with a warning)."""
    if target is None:
        return table
    if table is not None:
        raise TypeError(f"{operator}: give the table once, as table= (target= is its deprecated name)")
    warnings.warn(f"{operator}: target= is deprecated; use table= (the name every Paimon operator and sensor uses)",
                  _Deprecated, stacklevel=3)
    return target


class PaimonSparkSubmitOperator(CheckedArguments, PaimonLineage, SparkSubmitOperator):
    """Base of the operators that submit one of this package's Spark applications.

    :param paimon_conn_id: the Paimon connection (warehouse and filesystem options) (templated).
    :param ship_package: send the installed ``airflow_paimon`` package as a ``--py-files`` zip; default: only
        when the Spark master is not ``local``/``local[N]``.
    """

    app_name = ""
    template_fields: Sequence[str] = tuple(SparkSubmitOperator.template_fields) + ("paimon_conn_id",)
    operator_extra_links = (PaimonTableLink(),)

    def __init__(self, *, paimon_conn_id: str = "paimon_default", ship_package: bool | None = None,
                 **kwargs: Any) -> None:
        if "application" in kwargs:
            raise TypeError(f"{type(self).__name__} runs its own application; do not pass application=")
        kwargs.setdefault("name", f"paimon-{self.app_name.replace('_app', '')}")
        kwargs["outlets"] = self.commit_outlets(kwargs.get("outlets"))
        super().__init__(application=application_path(self.app_name), **kwargs)
        self.paimon_conn_id = paimon_conn_id
        self.ship_package = ship_package
        self._spec_dir: str | None = None
        self._result_file: str | None = None
        self._result_options: dict[str, str] = {}
        self._result_on_warehouse = False

    def check_arguments(self, rendered: bool) -> None:
        if not rendered and not isinstance(self.paimon_conn_id, str):
            raise args.ArgumentError(f"paimon_conn_id: expected a connection id, not {self.paimon_conn_id!r}")
        if self.ship_package is not None:
            args.flag(self.ship_package, "ship_package")

    # -- to be filled in by subclasses ---------------------------------------------------------------
    def build_spec(self, context: Context) -> dict[str, Any]:
        raise NotImplementedError

    # -- the hook ------------------------------------------------------------------------------------
    def spark_hook_arguments(self) -> dict[str, Any]:
        """The hook's arguments, taken from this operator as ``SparkSubmitOperator._get_hook`` takes them."""
        return dict(
            conf=self.conf, conn_id=self._conn_id, files=self.files, py_files=self.py_files,
            archives=self._archives, driver_class_path=self.driver_class_path, jars=self.jars,
            java_class=self._java_class, packages=self.packages, exclude_packages=self.exclude_packages,
            repositories=self._repositories, total_executor_cores=self._total_executor_cores,
            executor_cores=self._executor_cores, executor_memory=self._executor_memory,
            driver_memory=self._driver_memory, keytab=self.keytab, principal=self.principal,
            proxy_user=self.proxy_user, name=self.name, num_executors=self._num_executors,
            status_poll_interval=self._status_poll_interval, application_args=self.application_args,
            env_vars=self.env_vars, verbose=self._verbose, spark_binary=self._spark_binary,
            properties_file=self.properties_file, yarn_queue=self._yarn_queue, deploy_mode=self._deploy_mode,
            use_krb5ccache=self._use_krb5ccache, post_submit_commands=self.post_submit_commands,
            track_driver_via_k8s_api=self._track_driver_via_k8s_api,
            yarn_track_via_rm_api=self._yarn_track_via_rm_api, yarn_rm_auth=self._yarn_rm_auth,
        )

    def _get_hook(self) -> PaimonSparkSubmitHook:
        return PaimonSparkSubmitHook(**self.spark_hook_arguments())

    def paimon_hook(self) -> PaimonHook:
        from airflow_paimon.hooks.paimon import PaimonHook

        return PaimonHook(paimon_conn_id=self.paimon_conn_id)

    def lineage_hook(self) -> PaimonHook:
        return self.paimon_hook()

    # -- submission ------------------------------------------------------------------------------------
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
        probe = self._get_hook()   # the resolved Spark connection, before the arguments that depend on it
        cluster = probe.driver_runs_remotely
        if cluster and not (probe.on_yarn or probe.on_kubernetes):
            raise AirflowFailException(
                f"Spark connection {self._conn_id!r}: Spark cannot run Python applications on a standalone cluster "
                f"({probe.master}) in cluster deploy mode. Use client deploy mode (remove deploy-mode from the "
                "connection's extra, or pass deploy_mode='client'), or a YARN or Kubernetes cluster.")
        self.conf = dict(self.conf or {})
        env = dict(self.env_vars or {})
        if probe.on_this_machine:
            # The worker's own Python and (if not on PATH) its spark-submit.
            self.conf.setdefault("spark.pyspark.python", sys.executable)
            self.conf.setdefault("spark.pyspark.driver.python", sys.executable)
            env.setdefault("PYSPARK_PYTHON", sys.executable)
            env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            here = Path(sys.executable).parent
            if shutil.which(probe.binary) is None and (here / probe.binary).exists():
                env["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"
        ship = self.ship_package if self.ship_package is not None else not probe.is_local
        if ship:
            zipped = py_files_zip()
            self.py_files = f"{self.py_files},{zipped}" if self.py_files else zipped
        self.env_vars = env or None
        self._remove_spec_dir()
        if cluster and probe.on_kubernetes:
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
            else:
                self.application_args = ["--spec-file", path]
        self._result_on_warehouse = cluster
        if cluster:
            # The driver runs on the cluster: it writes its result under the warehouse, which it can reach.
            result_file = self._warehouse_result_path(context, paimon.warehouse)
            self._result_options = options
            remove_result_file(result_file, options)   # never read an earlier attempt's result
        else:  # the driver runs here: it writes its result beside the spec, in the private folder
            result_file = os.path.join(str(self._spec_dir), "result.json")
            self._result_options = {}
        self._result_file = result_file
        self.application_args += ["--result-file", result_file]
        self._hook = None  # built again by execute() with the arguments above
        return spec

    @staticmethod
    def _warehouse_result_path(context: Context, warehouse: str) -> str:
        """Where a driver on the cluster writes the result: one file per task instance (not per try, so that a
        driver the provider reconnects to after a worker restart writes where the operator looks)."""
        ti = context["ti"]
        key = stable_int64("result", ti.dag_id, ti.task_id, _run_id(context), getattr(ti, "map_index", -1))
        return f"{warehouse.rstrip('/')}/{RESULTS_FOLDER}/{ti.dag_id}.{ti.task_id}.{key:016x}.json"

    def _kubernetes_spec(self, spec: dict[str, Any], options: Mapping[str, str],
                         secret_names: Sequence[str]) -> dict[str, Any]:
        """The spec sent as an argument to a driver pod: the options that are no secret; the others must come
        from a Kubernetes secret named in the conf."""
        secrets = sorted(k for k in options if k in set(secret_names))
        if secrets and KUBERNETES_OPTIONS_SECRET_CONF not in (self.conf or {}):
            raise AirflowFailException(
                f"The Paimon connection {self.paimon_conn_id!r} holds secrets ({', '.join(secrets)}), which are never "
                "put on a spark-submit command line. On Kubernetes in cluster mode the driver pod takes them from a "
                "Kubernetes secret: store the options as JSON in one (e.g. kubectl create secret generic "
                "paimon-options --from-literal=options='{\"s3.secret-key\": \"...\"}') and pass "
                f"conf={{'{KUBERNETES_OPTIONS_SECRET_CONF}': 'paimon-options:options'}}; or use client deploy mode.")
        public = {k: v for k, v in options.items() if k not in secrets}
        return dict(spec, options=public) if public else spec

    def _remove_spec_dir(self) -> None:
        if self._spec_dir:
            shutil.rmtree(self._spec_dir, ignore_errors=True)
        self._spec_dir = None

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
            return self.collect_result(context, spec, self.app_result())
        finally:
            self._remove_spec_dir()
            self._remove_warehouse_result()

    def _remove_warehouse_result(self) -> None:
        """Delete a result file written under the warehouse once read (the local one goes with the spec folder)."""
        if self._result_file and self._result_on_warehouse:
            try:
                remove_result_file(self._result_file, self._result_options)
            except OSError as e:  # the task's outcome does not depend on it
                self.log.warning("Could not delete the result file %s: %s", self._result_file, e)

    def app_result(self) -> dict[str, Any] | None:
        """What the application wrote to its result file; None when it wrote none (it never got that far, or
        the file was lost with a restarted worker)."""
        if not self._result_file:
            return None
        return read_result_file(self._result_file, self._result_options)

    def _refused_input(self) -> str | None:
        """The application's own error when it refused its input (running it again cannot help), else None."""
        result = self.app_result() or {}
        if result.get("status") == "failed" and result.get("error"):
            return (f"{result['error']} [{Path(self.application).name} refused its input; the task is not "
                    "retried]")
        return None

    def collect_result(self, context: Context, spec: dict[str, Any], printed: dict[str, Any] | None) -> Any:
        """The task's XCom from the application's result (`printed`, None when there is none)."""
        return printed

    def committed_result(self, spec: dict[str, Any], identifier: int, printed: Mapping[str, Any],
                         keys: Sequence[str]) -> dict[str, Any]:
        """The XCom of an application that commits once: its result's `keys`, with the snapshot read back from
        the table, which holds the truth even when the result was lost (a retry after the commit landed)."""
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
