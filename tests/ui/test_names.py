"""Database and table names from URLs: plain names pass, anything that could leave the warehouse is refused."""

from __future__ import annotations

import pytest

from airflow_paimon.ui.names import UnsafeName, checked_name
from airflow_paimon.ui.urls import link_for, table_path


@pytest.mark.parametrize("name", ["orders", "orders_2026", "Sales-EU", "ü_table", "a.b"])
def test_plain_names_pass(name):
    assert checked_name("table", name) == name


@pytest.mark.parametrize("name", ["", " ", "..", ".", ".hidden", "../etc", "a/b", "/etc/passwd", "a\\b",
                                  "%2e%2e", "%2F", "c:", "s3://bucket", "a\x00b", "tab\tle", " orders", "x" * 256])
def test_escaping_names_are_refused(name):
    with pytest.raises(UnsafeName, match="^table: "):
        checked_name("table", name)


def test_table_path_quotes_every_part():
    assert table_path("paimon default", "db", "t?x") == "/paimon/connections/paimon%20default/tables/db/t%3Fx"


@pytest.mark.parametrize(("conn", "table", "expected"), [
    ("paimon_default", "sales.orders", "/paimon/connections/paimon_default/tables/sales/orders"),
    ("paimon_default", "{{ params.table }}", "/paimon/connections/paimon_default"),
    ("{{ var.value.conn }}", "sales.orders", "/paimon/"),
    ("paimon_default", None, "/paimon/connections/paimon_default"),
])
def test_operator_link_names_the_closest_page(conn, table, expected):
    assert link_for(conn, table) == expected
