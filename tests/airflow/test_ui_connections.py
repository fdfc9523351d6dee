"""Which ``paimon`` connections the tables view lists: environment variables, a LocalFilesystemBackend file and
the metadata database, never another type, a team's variable, or the secrets."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.airflow


@pytest.fixture
def file_backend(tmp_path, monkeypatch):
    """A LocalFilesystemBackend configured as the secrets backend; returns its connections file."""
    path = tmp_path / "connections.json"
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", "airflow.secrets.local_filesystem.LocalFilesystemBackend")
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND_KWARGS", json.dumps({"connections_file_path": str(path)}))
    return path


def test_connections_of_the_environment_a_secrets_file_and_the_database_are_listed(
        airflow_db, tmp_path, monkeypatch, file_backend):
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    from airflow_paimon.ui.connections import open_warehouse, paimon_connection_ids

    warehouse = str(tmp_path / "wh")
    file_backend.write_text(json.dumps({
        "paimon_in_file": {"conn_type": "paimon", "login": "AKIAFILE", "password": "file-secret-value",
                           "extra": {"warehouse": warehouse}},
        "http_in_file": {"conn_type": "http", "host": "example.org"}}))
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_IN_ENV", f"paimon://?warehouse={warehouse}")
    monkeypatch.setenv("AIRFLOW_CONN_HTTP_IN_ENV", "http://example.org")
    monkeypatch.setenv("AIRFLOW_CONN__TEAM_A___PAIMON_OF_TEAM", f"paimon://?warehouse={warehouse}")
    with create_session() as session:
        session.add(Connection(conn_id="paimon_in_db", conn_type="paimon", extra=json.dumps({"warehouse": warehouse})))
    try:
        assert paimon_connection_ids() == ["paimon_in_db", "paimon_in_env", "paimon_in_file"]
        wh = open_warehouse("paimon_in_file")  # read through PaimonHook, from the file
        assert wh.shown_uri == warehouse and "file-secret-value" not in wh.shown_uri
        file_backend.write_text("{not json")  # a broken file hides its own connections only
        assert paimon_connection_ids() == ["paimon_in_db", "paimon_in_env"]
    finally:
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == "paimon_in_db").delete()
