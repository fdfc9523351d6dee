"""The ``paimon`` connections the API server can see, and their warehouses opened as catalogs.

Connections are listed from the metadata database and from ``AIRFLOW_CONN_*`` environment variables (a secrets
backend cannot be listed; a connection kept only there is reached by its URL). A warehouse is opened through
``PaimonHook``, so the page reads exactly what the operators read. Only the connection id and the warehouse URI
without any user:password part ever reach a page: the filesystem options (keys, secrets) stay in the server.
"""

from __future__ import annotations

import json
import os

from airflow_paimon.format import Catalog
from airflow_paimon.hooks.paimon import PaimonHook, redact_uri

__all__ = ["PaimonWarehouse", "open_warehouse", "paimon_connection_ids"]

_ENV_PREFIX = "AIRFLOW_CONN_"


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


def _database_conn_ids() -> list[str]:
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return list(session.scalars(select(Connection.conn_id).where(Connection.conn_type == PaimonHook.conn_type)))


def paimon_connection_ids() -> list[str]:
    """The ids of the ``paimon`` connections defined in the environment or in the metadata database."""
    found = {name[len(_ENV_PREFIX):].lower() for name, value in os.environ.items()
             if name.startswith(_ENV_PREFIX) and _environment_conn_type(value) == PaimonHook.conn_type}
    found.update(_database_conn_ids())
    return sorted(found)


def open_warehouse(conn_id: str) -> PaimonWarehouse:
    """The connection's warehouse; PaimonConnectionNotFound when the connection does not exist."""
    hook = PaimonHook(paimon_conn_id=conn_id)
    return PaimonWarehouse(conn_id, hook.get_catalog(), hook.warehouse)
