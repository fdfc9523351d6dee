"""The Airflow asset of a Paimon table: one name and one URI per table, whoever writes them.

A table is identified as Paimon's lineage identifies it (Flink's lineage vertices): the warehouse (the
namespace) and ``database.table`` (the name). Its asset joins them under the ``paimon`` scheme, with the
warehouse's own scheme and any credentials left out::

    /data/wh           + sales.orders  ->  paimon:///data/wh/sales.orders
    s3://bucket/wh     + sales.orders  ->  paimon://bucket/wh/sales.orders

The asset's name and URI are that same string, which is what ``Asset("paimon:///data/wh/sales.orders")``
gives; a DAG scheduled on either form waits for the events :class:`~airflow_paimon.operators.tags.
CreateTagOperator` emits. (Airflow stores a local warehouse's URI as ``paimon:/data/wh/sales.orders``; the name
keeps the three slashes.)
"""

from __future__ import annotations

from airflow.sdk import Asset

from airflow_paimon.arguments import table_identifier
from airflow_paimon.lineage import warehouse_namespace

__all__ = ["paimon_table_asset", "table_asset", "table_asset_uri"]


def table_asset_uri(warehouse: str, identifier: str) -> str:
    """``paimon://<warehouse without scheme or credentials>/<database.table>`` (a local warehouse, made
    absolute, gives ``paimon:///<path>/<database.table>``): the table's lineage namespace and name."""
    identifier = table_identifier(identifier)
    base = warehouse_namespace(warehouse).split("://", 1)[1]
    return f"paimon://{base.rstrip('/')}/{identifier}"


def table_asset(warehouse: str, identifier: str) -> Asset:
    """The asset of the table ``identifier`` of ``warehouse``: name and URI are :func:`table_asset_uri`."""
    uri = table_asset_uri(warehouse, identifier)
    return Asset(name=uri, uri=uri)


def paimon_table_asset(table: str, paimon_conn_id: str = "paimon_default", *, warehouse: str | None = None) -> Asset:
    """The asset of ``table`` (``database.table``) of a Paimon connection's warehouse, for ``schedule=`` and
    ``outlets=`` in DAG files.

    The warehouse is ``warehouse`` when given, else read from the connection, which works while the DAG is
    parsed only when the connection is an ``AIRFLOW_CONN_<ID>`` environment variable of the DAG processor
    (reading one from the metadata database or a secrets backend would cost a round trip on every parse, so
    it is not done): otherwise pass ``warehouse=``.
    """
    from airflow_paimon.hooks.paimon import environment_warehouse

    identifier = table_identifier(table)
    if warehouse is None:
        warehouse = environment_warehouse(paimon_conn_id)
        if warehouse is None:
            variable = "AIRFLOW_CONN_" + paimon_conn_id.upper()
            raise ValueError(
                f"paimon_table_asset({table!r}): the connection {paimon_conn_id!r} is not in the environment "
                f"({variable}), and reading it from Airflow's database or a secrets backend while the DAG file is "
                f"parsed is not done; pass warehouse='...' (the connection's warehouse) or define {variable}"
            )
    return table_asset(warehouse, identifier)
