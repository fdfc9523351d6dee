"""The operators' extra link to their table's page in the tables view.

The link is built from the operator's ``table`` and ``paimon_conn_id`` as the DAG declares them; a templated value
is known only once rendered in the worker, so then the link goes to the connection's list of tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

from airflow_paimon.ui.urls import link_for

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

__all__ = ["PaimonTableLink"]


class PaimonTableLink(BaseOperatorLink):
    """"Paimon table": the operator's table in the tables view."""

    name = "Paimon table"

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:  # noqa: ARG002
        return link_for(getattr(operator, "paimon_conn_id", None), getattr(operator, "table", None))
