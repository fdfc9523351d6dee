"""PaimonHook: connection -> warehouse and filesystem options -> Catalog, secrets kept out of sight."""

from __future__ import annotations

import json
import logging

import pytest

import airflow_paimon.format as paimon_format
from airflow_paimon.hooks.paimon import PaimonConnectionNotFound, PaimonHook

pytestmark = pytest.mark.airflow

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def set_connection(monkeypatch, conn_id: str = "paimon_default", **fields) -> None:
    fields.setdefault("conn_type", "paimon")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


class FakeTable:
    def __init__(self, identifier):
        self.identifier = identifier


class FakeCatalog:
    """Stands in for airflow_paimon.format.Catalog(warehouse, options=...)."""

    instances: list[FakeCatalog] = []

    def __init__(self, warehouse: str, options: dict[str, str] | None = None):
        self.warehouse = warehouse
        self.options = options
        FakeCatalog.instances.append(self)

    def get_table(self, identifier):
        return FakeTable(identifier)

    def list_databases(self):
        return ["default"]


@pytest.fixture
def fake_catalog(monkeypatch):
    FakeCatalog.instances = []
    monkeypatch.setattr(paimon_format, "Catalog", FakeCatalog, raising=False)
    return FakeCatalog


def test_connection_from_env_json(monkeypatch):
    set_connection(
        monkeypatch,
        login="AKIAEXAMPLE",
        password=SECRET,
        extra={
            "warehouse": "s3://bucket/wh",
            "s3.endpoint": "http://localhost:9000",
            "s3.path.style.access": True,
            "fs.s3a.connection.maximum": 64,
        },
    )
    hook = PaimonHook()
    assert hook.warehouse == "s3://bucket/wh"
    assert hook.options == {
        "s3.endpoint": "http://localhost:9000",
        "s3.path.style.access": "true",
        "fs.s3a.connection.maximum": "64",
        "s3.access-key": "AKIAEXAMPLE",
        "s3.secret-key": SECRET,
    }


def test_other_connection_id_and_form_style_extras(monkeypatch):
    set_connection(
        monkeypatch,
        "lake",
        password=SECRET,
        extra={
            "extra__paimon__warehouse": "oss://bucket/wh",
            "extra__paimon__secret_key_option": "",
            "options": {"fs.oss.endpoint": "oss-cn-hangzhou.aliyuncs.com"},
        },
    )
    hook = PaimonHook(paimon_conn_id="lake")
    assert hook.warehouse == "oss://bucket/wh"
    assert hook.options == {"fs.oss.endpoint": "oss-cn-hangzhou.aliyuncs.com", "fs.oss.accessKeySecret": SECRET}


def test_azure_account_and_key_from_login_and_password(monkeypatch, fake_catalog):
    set_connection(monkeypatch, login="lake", password=SECRET,
                   extra={"warehouse": "az://box/wh", "fs.azure.endpoint": "http://127.0.0.1:10000/lake",
                          "fs.azure.account.key.other.dfs.core.windows.net": "other-" + SECRET})
    hook = PaimonHook()
    assert hook.options == {"fs.azure.endpoint": "http://127.0.0.1:10000/lake", "fs.azure.account.name": "lake",
                            "fs.azure.account.key": SECRET,
                            "fs.azure.account.key.other.dfs.core.windows.net": "other-" + SECRET}
    assert SECRET not in repr(hook)


def test_custom_credential_options_and_overrides(monkeypatch):
    set_connection(
        monkeypatch,
        login="me",
        password=SECRET,
        extra={"warehouse": "hdfs:///wh", "access_key_option": "fs.user", "secret_key_option": "fs.password"},
    )
    hook = PaimonHook(options={"fs.extra": 1}, warehouse="/override")
    assert hook.warehouse == "/override"
    assert hook.options == {"fs.user": "me", "fs.password": SECRET, "fs.extra": "1"}


@pytest.mark.parametrize(
    ("fields", "warehouse"),
    [
        ({"host": "/data/wh"}, "/data/wh"),
        ({"host": "s3://bucket", "schema": "warehouse"}, "s3://bucket/warehouse"),
        ({"host": "s3://bucket/", "schema": "/warehouse"}, "s3://bucket/warehouse"),
        ({"schema": "/data/wh"}, "/data/wh"),
        ({"host": "/ignored", "extra": {"warehouse": "/data/wh"}}, "/data/wh"),
    ],
)
def test_warehouse_fallback_to_host_and_schema(monkeypatch, fields, warehouse):
    set_connection(monkeypatch, **fields)
    assert PaimonHook().warehouse == warehouse


def test_connection_uri_form(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_PAIMON_DEFAULT", "paimon://%2Fdata%2Fwh?s3.endpoint=http%3A%2F%2Fminio%3A9000")
    hook = PaimonHook()
    assert hook.warehouse == "/data/wh"
    assert hook.options == {"s3.endpoint": "http://minio:9000"}


def test_no_warehouse(monkeypatch):
    set_connection(monkeypatch, extra={"s3.endpoint": "http://x"})
    with pytest.raises(ValueError, match="names no warehouse"):
        PaimonHook().warehouse  # noqa: B018


def test_missing_connection_says_how_to_create_it(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_PAIMON_DEFAULT", raising=False)
    with pytest.raises(PaimonConnectionNotFound) as err:
        PaimonHook().get_catalog()
    message = str(err.value)
    assert "'paimon_default' is not defined" in message
    assert 'AIRFLOW_CONN_PAIMON_DEFAULT=\'{"conn_type": "paimon", "extra": {"warehouse": "/data/wh"}}\'' in message
    assert "airflow connections add paimon_default --conn-type paimon" in message
    # the advice is valid JSON for Airflow
    env_value = message.split("AIRFLOW_CONN_PAIMON_DEFAULT='")[1].split("'")[0]
    assert json.loads(env_value) == {"conn_type": "paimon", "extra": {"warehouse": "/data/wh"}}
    # it is still Airflow's not-found error
    from airflow.sdk.exceptions import AirflowNotFoundException

    assert isinstance(err.value, AirflowNotFoundException)
    with pytest.raises(PaimonConnectionNotFound, match="AIRFLOW_CONN_MY_LAKE="):
        PaimonHook("my-lake").warehouse  # noqa: B018


def test_get_catalog_and_table(monkeypatch, fake_catalog):
    set_connection(monkeypatch, password=SECRET, extra={"warehouse": "s3://bucket/wh", "s3.endpoint": "http://x"})
    hook = PaimonHook()
    catalog = hook.get_catalog()
    assert isinstance(catalog, FakeCatalog)
    assert catalog.warehouse == "s3://bucket/wh"
    assert catalog.options == {"s3.endpoint": "http://x", "s3.secret-key": SECRET}
    assert hook.get_conn().warehouse == "s3://bucket/wh"
    table = hook.get_table("db.orders")
    assert isinstance(table, FakeTable) and table.identifier == "db.orders"
    assert hook.test_connection() == (True, "Opened the warehouse s3://bucket/wh (1 databases)")


def test_catalog_is_imported_lazily():
    """The hook module itself does not need the format library's Catalog."""
    import airflow_paimon.hooks.paimon as module

    assert "Catalog" not in vars(module)


def test_secret_never_in_logs_or_repr(monkeypatch, fake_catalog, caplog, capsys):
    set_connection(
        monkeypatch,
        login="AKIAEXAMPLE",
        password=SECRET,
        extra={"warehouse": f"s3://user:{SECRET}@bucket/wh", "s3.session-token": "tok-" + SECRET},
    )
    caplog.set_level(logging.DEBUG)
    hook = PaimonHook(options={"fs.password": SECRET})
    hook.get_catalog()
    ok, message = hook.test_connection()
    assert ok
    texts = [repr(hook), str(hook), caplog.text, message, *capsys.readouterr()]
    for text in texts:
        assert SECRET not in text
    assert "***@bucket" in caplog.text + "".join(texts)
    # Airflow's secrets masker knows the secret, so task logs would redact it
    try:
        from airflow.sdk._shared.secrets_masker import redact
    except ImportError:  # pragma: no cover - other SDK layouts
        pytest.skip("no secrets masker to check")
    assert SECRET not in str(redact(f"key={SECRET}"))
    assert SECRET not in str(redact(f"token=tok-{SECRET}"))


def test_missing_connection_error_has_no_secret(monkeypatch):
    set_connection(monkeypatch, "other", password=SECRET, extra={"warehouse": "/wh"})
    with pytest.raises(PaimonConnectionNotFound) as err:
        PaimonHook("absent").warehouse  # noqa: B018
    assert SECRET not in str(err.value)
