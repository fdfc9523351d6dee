"""PaimonSparkSubmitHook: the Spark provider's ``SparkSubmitHook`` with one difference, and the facts about the
resolved Spark connection that the Paimon operators decide on.

The difference: a missing Spark connection means ``local[*]`` with the worker's own Python (nothing to
configure for a laptop or a single-machine Airflow), where the provider's hook falls back to ``yarn``. The hook
is built like the provider's operator builds its own, from the operator's arguments; everything else
(command line, log streaming, driver tracking, kill, post-submit commands) is the provider's.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

__all__ = ["DEFAULT_LOCAL_MASTER", "PaimonSparkSubmitHook"]

DEFAULT_LOCAL_MASTER = "local[*]"


class PaimonSparkSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` that runs Spark locally (``local[*]``) when its Spark connection does not exist."""

    def _resolve_connection(self) -> dict[str, Any]:
        # Called by SparkSubmitHook.__init__, before it derives its YARN/Kubernetes/driver-tracking flags from
        # the result: overriding it here keeps all of them consistent with the local master.
        try:
            self.get_connection(self._conn_id)
            missing = False
        except (AirflowNotFoundException, AirflowException):
            missing = True
        conn: dict[str, Any] = super()._resolve_connection()
        if missing:
            self.log.info("No Spark connection %r: running Spark locally (%s)", self._conn_id, DEFAULT_LOCAL_MASTER)
            conn["master"] = DEFAULT_LOCAL_MASTER
        return conn

    @property
    def master(self) -> str:
        """The Spark master the application is submitted to (``local[*]``, ``yarn``, ``spark://...``, ...)."""
        return str(self._connection["master"])

    @property
    def binary(self) -> str:
        """The spark-submit executable (the connection's ``spark-binary``, default ``spark-submit``)."""
        return str(self._connection.get("spark_binary") or "spark-submit")

    @property
    def is_local(self) -> bool:
        """Spark runs in one process here (``local``, ``local[N]``): executors import the installed package."""
        return self.master == "local" or self.master.startswith("local[")

    @property
    def on_this_machine(self) -> bool:
        """Driver and executors run here (``local[N]`` or ``local-cluster[...]``), with the worker's Python."""
        return self.is_local or self.master.startswith("local-cluster")

    @property
    def driver_runs_remotely(self) -> bool:
        """Cluster deploy mode: the driver runs on the cluster, so it cannot read or write this machine's files."""
        return self._connection.get("deploy_mode") == "cluster"

    @property
    def on_yarn(self) -> bool:
        return bool(self._is_yarn)

    @property
    def on_kubernetes(self) -> bool:
        return bool(self._is_kubernetes)
