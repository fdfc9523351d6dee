"""PaimonHook: an Airflow connection of type ``paimon`` -> a format-library ``Catalog``.

The connection holds the warehouse and the filesystem options::

    AIRFLOW_CONN_PAIMON_DEFAULT='{"conn_type": "paimon",
                                  "login": "AKIA...", "password": "...",
                                  "extra": {"warehouse": "s3://bucket/wh", "s3.endpoint": "http://minio:9000"}}'

* ``extra.warehouse`` is the warehouse root; when it is missing, ``host`` (joined with ``schema`` when set)
  is used instead.
* Every other key of ``extra`` is a filesystem option passed to the catalog as a string (a nested
  ``extra.options`` object is merged in as well).
* ``login`` and ``password`` become the access-key and secret-key options: ``s3.access-key`` and
  ``s3.secret-key`` for ``s3://``/``s3a://``/``s3n://`` warehouses, ``fs.oss.accessKeyId`` and
  ``fs.oss.accessKeySecret`` for ``oss://``, ``fs.azure.account.name`` and ``fs.azure.account.key`` for
  ``abfs://``/``abfss://``/``az://``, or whatever ``extra.access_key_option`` /
  ``extra.secret_key_option`` name. The secret is masked in task logs and never shown by ``repr``.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_paimon.format import Catalog, Table

__all__ = [
    "PaimonConnectionNotFound",
    "PaimonHook",
    "connection_warehouse",
    "environment_warehouse",
    "missing_connection_message",
    "redact_uri",
]

# Keys of `extra` that configure the hook itself rather than the filesystem.
_HOOK_KEYS = ("warehouse", "access_key_option", "secret_key_option", "options")

_CREDENTIAL_OPTIONS = {
    "s3": ("s3.access-key", "s3.secret-key"),
    "s3a": ("s3.access-key", "s3.secret-key"),
    "s3n": ("s3.access-key", "s3.secret-key"),
    "oss": ("fs.oss.accessKeyId", "fs.oss.accessKeySecret"),
    # Azure: the storage account and its key (Hadoop ABFS's names, as Paimon passes them on)
    "abfs": ("fs.azure.account.name", "fs.azure.account.key"),
    "abfss": ("fs.azure.account.name", "fs.azure.account.key"),
    "az": ("fs.azure.account.name", "fs.azure.account.key"),
}
_DEFAULT_CREDENTIAL_OPTIONS = _CREDENTIAL_OPTIONS["s3"]

# Option names whose values are secrets (masked in logs, hidden in repr).
_SENSITIVE_WORDS = ("secret", "password", "passwd", "token", "private", "credential", "sas", "accesskeysecret",
                    "account.key")


class PaimonConnectionNotFound(AirflowNotFoundException):
    """The Paimon connection is not defined (the message says how to define it)."""


def _is_sensitive(option: str) -> bool:
    lowered = option.lower()
    return any(word in lowered for word in _SENSITIVE_WORDS)


def _secret_names(options: dict[str, str], secret_option: str) -> list[str]:
    return sorted(k for k, v in options.items() if v and (k == secret_option or _is_sensitive(k)))


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def redact_uri(uri: str) -> str:
    """A URI without any user:password part, for logs."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "<unparseable warehouse URI>"
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def _extra_value(extra: dict[str, Any], conn_type: str, name: str) -> Any:
    """An extra field under its plain name or under the ``extra__<type>__<name>`` form of older UIs."""
    value = extra.get(name)
    if value in (None, ""):
        value = extra.get(f"extra__{conn_type}__{name}")
    return None if value == "" else value


def missing_connection_message(conn_id: str) -> str:
    env = "AIRFLOW_CONN_" + conn_id.upper().replace("-", "_")
    return (
        f"The Paimon connection {conn_id!r} is not defined. Create it, for example with the environment variable\n"
        f'  {env}=\'{{"conn_type": "paimon", "extra": {{"warehouse": "/data/wh"}}}}\'\n'
        f"or with the CLI:\n"
        f'  airflow connections add {conn_id} --conn-type paimon --conn-extra \'{{"warehouse": "/data/wh"}}\'\n'
        f'(for object stores use e.g. "s3://bucket/wh" and put the access key in login, the secret key in '
        f'password and other filesystem options such as "s3.endpoint" in extra).'
    )


def connection_warehouse(conn: Connection, conn_id: str) -> str:
    """The warehouse root a Paimon connection names: ``extra.warehouse``, else ``host[/schema]``."""
    extra = conn.extra_dejson if isinstance(conn.extra_dejson, dict) else {}
    warehouse = _extra_value(extra, PaimonHook.conn_type, "warehouse")
    if not warehouse:
        host = (conn.host or "").strip()
        schema = (conn.schema or "").strip()
        if host and schema:
            warehouse = host.rstrip("/") + "/" + schema.lstrip("/")
        else:
            warehouse = host or schema
    if not warehouse:
        raise ValueError(
            f"The Paimon connection {conn_id!r} names no warehouse: set extra "
            f'{{"warehouse": "/data/wh"}} (or s3://bucket/wh), or the connection\'s host'
        )
    return str(warehouse)


def environment_warehouse(conn_id: str) -> str | None:
    """The warehouse of the connection ``conn_id`` when it is defined by an ``AIRFLOW_CONN_<ID>`` environment
    variable, else None. Reads nothing but the environment, so DAG files may call it while being parsed (a
    connection in the metadata database or a secrets backend would cost a round trip on every parse)."""
    from airflow.sdk import Connection

    value = os.environ.get("AIRFLOW_CONN_" + conn_id.upper())
    if not value:
        return None
    text = value.strip()
    conn = Connection.from_json(text, conn_id=conn_id) if text.startswith("{") else Connection.from_uri(
        text, conn_id=conn_id)
    return connection_warehouse(conn, conn_id)


class PaimonHook(BaseHook):
    """Opens the Paimon warehouse of an Airflow connection as a format-library ``Catalog``.

    :param paimon_conn_id: the connection id (type ``paimon``); default ``paimon_default``.
    :param warehouse: use this warehouse instead of the connection's.
    :param options: extra filesystem options, applied over the connection's.
    """

    conn_name_attr = "paimon_conn_id"
    default_conn_name = "paimon_default"
    conn_type = "paimon"
    hook_name = "Apache Paimon"

    def __init__(
        self,
        paimon_conn_id: str = default_conn_name,
        *,
        warehouse: str | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.paimon_conn_id = paimon_conn_id
        self._warehouse_override = warehouse
        self._options_override = {str(k): _option_value(v) for k, v in (options or {}).items()}

    def __repr__(self) -> str:
        # Option names only: values may be secrets.
        try:
            names = sorted(self._options_override)
        except Exception:  # pragma: no cover - defensive
            names = []
        return (
            f"{type(self).__name__}(paimon_conn_id={self.paimon_conn_id!r}"
            + (f", warehouse={redact_uri(self._warehouse_override)!r}" if self._warehouse_override else "")
            + (f", options={names!r}" if names else "")
            + ")"
        )

    # -- connection -----------------------------------------------------------------------------------

    @cached_property
    def connection(self) -> Connection:
        try:
            conn = self.get_connection(self.paimon_conn_id)
        except AirflowNotFoundException:
            raise PaimonConnectionNotFound(missing_connection_message(self.paimon_conn_id)) from None
        if conn.conn_type and conn.conn_type != self.conn_type:
            self.log.warning(
                "Connection %r has type %r, not %r; reading it as a Paimon connection",
                self.paimon_conn_id,
                conn.conn_type,
                self.conn_type,
            )
        return conn

    def _extra(self) -> dict[str, Any]:
        extra = self.connection.extra_dejson
        return extra if isinstance(extra, dict) else {}

    @cached_property
    def warehouse(self) -> str:
        """The warehouse root: ``warehouse=`` of the hook, else ``extra.warehouse``, else ``host[/schema]``."""
        if self._warehouse_override:
            return self._warehouse_override
        return connection_warehouse(self.connection, self.paimon_conn_id)

    def _credential_option_names(self) -> tuple[str, str]:
        extra = self._extra()
        scheme = urlsplit(self.warehouse).scheme.lower() if "://" in self.warehouse else ""
        access_default, secret_default = _CREDENTIAL_OPTIONS.get(scheme, _DEFAULT_CREDENTIAL_OPTIONS)
        access = _extra_value(extra, self.conn_type, "access_key_option") or access_default
        secret = _extra_value(extra, self.conn_type, "secret_key_option") or secret_default
        return str(access), str(secret)

    @cached_property
    def options(self) -> dict[str, str]:
        """The filesystem options for the catalog (values may be secrets: never log them)."""
        conn = self.connection
        extra = self._extra()
        options: dict[str, str] = {}
        nested = extra.get("options")
        if isinstance(nested, dict):
            options.update({str(k): _option_value(v) for k, v in nested.items()})
        prefix = f"extra__{self.conn_type}__"
        for key, value in extra.items():
            name = key[len(prefix) :] if key.startswith(prefix) else key
            if name in _HOOK_KEYS or value is None or value == "":
                continue
            options[name] = _option_value(value)
        access_option, secret_option = self._credential_option_names()
        if conn.login:
            options[access_option] = conn.login
        if conn.password:
            options[secret_option] = conn.password
        options.update(self._options_override)
        self._mask([options[k] for k in _secret_names(options, secret_option)])
        return options

    @property
    def secret_option_names(self) -> list[str]:
        """The names of the options whose values are secrets (the secret key, anything named like a password or
        token): masked in logs, and never put on a command line."""
        return _secret_names(self.options, self._credential_option_names()[1])

    @staticmethod
    def _mask(secrets: list[str]) -> None:
        if not secrets:
            return
        try:
            from airflow.sdk.log import mask_secret
        except ImportError:  # pragma: no cover - older SDKs
            return
        for secret in secrets:
            mask_secret(secret)

    # -- catalog --------------------------------------------------------------------------------------

    def get_conn(self) -> Catalog:
        """The catalog (``BaseHook`` interface)."""
        return self.get_catalog()

    def get_catalog(self) -> Catalog:
        """A format-library ``Catalog`` on the connection's warehouse and filesystem options."""
        from airflow_paimon.format import Catalog

        warehouse, options = self.warehouse, self.options
        self.log.info(
            "Opening the Paimon warehouse %s (connection %r, options: %s)",
            redact_uri(warehouse),
            self.paimon_conn_id,
            ", ".join(sorted(options)) or "none",
        )
        return Catalog(warehouse, options=dict(options))

    def get_table(self, identifier: str) -> Table:
        """The table ``identifier`` (``database.table``) of the connection's warehouse."""
        return self.get_catalog().get_table(identifier)

    def test_connection(self) -> tuple[bool, str]:
        """Check that the connection names a warehouse that the catalog can open."""
        try:
            catalog = self.get_catalog()
            list_databases = getattr(catalog, "list_databases", None)
            if callable(list_databases):
                databases = list(list_databases())
                return True, f"Opened the warehouse {redact_uri(self.warehouse)} ({len(databases)} databases)"
            return True, f"Opened the warehouse {redact_uri(self.warehouse)}"
        except Exception as exc:
            return False, str(exc)
