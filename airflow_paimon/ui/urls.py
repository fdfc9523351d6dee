"""The paths of the tables view, shared by the app, its pages and the operators' extra link.

The link is built from the operator's ``table`` and ``paimon_conn_id`` as the DAG declares them; a templated value
is known only once rendered in the worker, so then the link goes to the connection's list of tables.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

__all__ = ["URL_PREFIX", "connection_path", "link_for", "table_path"]

URL_PREFIX = "/paimon"


def connection_path(conn_id: str) -> str:
    return f"{URL_PREFIX}/connections/{quote(conn_id, safe='')}"


def table_path(conn_id: str, database: str, table: str) -> str:
    return f"{connection_path(conn_id)}/tables/{quote(database, safe='')}/{quote(table, safe='')}"


def _plain(value: Any) -> str | None:
    return value if isinstance(value, str) and value and "{{" not in value and "{%" not in value else None


def link_for(conn_id: Any, table: Any) -> str:
    """The page of ``table`` (``database.table``) of ``conn_id``, or the closest page that can be named."""
    conn = _plain(conn_id)
    if conn is None:
        return f"{URL_PREFIX}/"
    identifier = _plain(table)
    if identifier is None or identifier.count(".") != 1:
        return connection_path(conn)
    database, name = identifier.split(".")
    return table_path(conn, database, name)
