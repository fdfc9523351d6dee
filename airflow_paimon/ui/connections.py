"""The ``paimon`` connections the API server can see, and their warehouses opened as catalogs.

Connections are listed from every configured source that can enumerate its connections: ``AIRFLOW_CONN_*``
environment variables, a ``LocalFilesystemBackend`` file (``[secrets] backend``) and the metadata database, in
the order Airflow searches them. Other secrets backends (Vault, AWS Secrets Manager, GCP Secret Manager...) can
only be asked for one id at a time: a connection kept there is not listed, but its page opens by URL
(``/paimon/connections/<id>``), since the page reads the connection through ``PaimonHook`` like any task. A
warehouse is opened through ``PaimonHook``, so the page reads exactly what the operators read. Only the connection
id and the warehouse URI without any user:password part ever reach a page: the filesystem options (keys,
secrets) stay in the server.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from airflow_paimon.format import Catalog
from airflow_paimon.hooks.paimon import PaimonHook, redact_uri

__all__ = ["PaimonWarehouse", "open_warehouse", "paimon_connection_ids"]

log = logging.getLogger(__name__)

_ENV_PREFIX = "AIRFLOW_CONN_"
_TEAM_PREFIX = "_"  # AIRFLOW_CONN__<TEAM>___<ID>: a team's connection, not a connection id


class PaimonWarehouse:
    """One connection's warehouse: its catalog and the URI shown on pages."""

    def __init__(self, conn_id: str, catalog: Catalog, warehouse: str) -> None:
        self.conn_id = conn_id
        self.catalog = catalog
        self.shown_uri = redact_uri(warehouse)


def _environment_conn_type(value: str) -> str | None:
    text = value.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
        kind = parsed.get("conn_type") if isinstance(parsed, dict) else None
        return str(kind) if kind else None
    scheme = text.split("://", 1)[0] if "://" in text else None
    return scheme.replace("-", "_") if scheme else None


def _environment_conn_ids() -> set[str]:
    return {name[len(_ENV_PREFIX):].lower() for name, value in os.environ.items()
            if name.startswith(_ENV_PREFIX) and not name[len(_ENV_PREFIX):].startswith(_TEAM_PREFIX)
            and _environment_conn_type(value) == PaimonHook.conn_type}


def _file_conn_ids(backend: Any) -> set[str]:
    """The ``paimon`` connections of a LocalFilesystemBackend's connections file (read as the backend reads it)."""
    from airflow.exceptions import AirflowException
    from airflow.secrets.local_filesystem import load_connections_dict

    path = getattr(backend, "connections_file", None)
    if not path:
        return set()
    try:
        connections = load_connections_dict(path)
    except (AirflowException, OSError) as exc:  # a broken file hides its connections, not the others
        log.warning("Cannot list the connections of %s: %s", path, exc)
        return set()
    return {conn_id for conn_id, conn in connections.items() if conn.conn_type == PaimonHook.conn_type}


def _database_conn_ids() -> set[str]:
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return set(session.scalars(select(Connection.conn_id).where(Connection.conn_type == PaimonHook.conn_type)))


def paimon_connection_ids() -> list[str]:
    """The ids of the ``paimon`` connections of every configured source that can list its connections."""
    from airflow.configuration import ensure_secrets_loaded
    from airflow.secrets.environment_variables import EnvironmentVariablesBackend
    from airflow.secrets.local_filesystem import LocalFilesystemBackend
    from airflow.secrets.metastore import MetastoreBackend

    found: set[str] = set()
    for backend in ensure_secrets_loaded():
        if isinstance(backend, EnvironmentVariablesBackend):
            found |= _environment_conn_ids()
        elif isinstance(backend, LocalFilesystemBackend):
            found |= _file_conn_ids(backend)
        elif isinstance(backend, MetastoreBackend):
            found |= _database_conn_ids()
    return sorted(found)


def open_warehouse(conn_id: str) -> PaimonWarehouse:
    """The connection's warehouse; PaimonConnectionNotFound when the connection does not exist."""
    hook = PaimonHook(paimon_conn_id=conn_id)
    return PaimonWarehouse(conn_id, hook.get_catalog(), hook.warehouse)
