"""Filesystem options of object stores, under the names Paimon reads, turned into pyarrow's S3 arguments.

Paimon documents ``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ``s3.path.style.access`` and
``s3.region``; its S3 file IO also takes every ``s3.``/``s3a.``/``fs.s3a.`` key as the Hadoop S3A option of the
same suffix (``fs.s3a.access.key`` ...), and pypaimon reads ``fs.s3.accessKeyId``-style names. All of them are
accepted here. For ``oss://`` warehouses Paimon's names are ``fs.oss.endpoint``, ``fs.oss.accessKeyId``,
``fs.oss.accessKeySecret`` and ``fs.oss.securityToken``.

Google Cloud Storage (``gs://``): Paimon hands every ``fs.gs.``/``gs.`` key to Hadoop's GCS connector, whose
``fs.gs.storage.root.url`` names the API's root (an emulator's address), ``fs.gs.auth.type`` the way to sign
(``UNAUTHENTICATED`` for an emulator) and ``fs.gs.project.id`` the project; pypaimon reads ``gcs.project-id``.
Credentials otherwise come from the environment (``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server).

Azure (``abfs://``, ``abfss://``, ``az://``): Paimon hands every ``fs.azure.``/``azure.`` key to Hadoop's ABFS,
whose account key is ``fs.azure.account.key.<account>.dfs.core.windows.net`` (or ``.blob.``), which Paimon also
accepts as plain ``fs.azure.account.key``. Hadoop has no name for a blob endpoint of one's own (Azurite's
``http://127.0.0.1:10000/devstoreaccount1``): this library reads ``fs.azure.endpoint``; the account is the host
of ``abfs://container@account.dfs.core.windows.net/...``, else ``fs.azure.account.name``.

``s3.path-style-access``, this library's former spelling, still works but warns (FutureWarning). A key that no
rule here reads is named in a warning instead of being ignored silently: a misspelt endpoint otherwise shows up
only as an access error against AWS. Without ``s3.endpoint``, the endpoint is ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` from the environment, as AWS's SDKs read it.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidOptionError

__all__ = ["AzureSettings", "CONDITIONAL_WRITES", "DEPRECATED_OPTIONS", "FilesystemOptionWarning", "GcsSettings",
           "LOCK_DIR", "LOCK_ENABLED", "azure_settings", "flag", "gcs_settings", "s3_filesystem_arguments"]

LOCK_ENABLED = "lock.enabled"
"""Paimon's catalog option: serialise commits per table with a lock (here a host lock, commit_lock.py)."""
LOCK_DIR = "lock.dir"
"""Where the lock files live (this library's option; default: the system's temporary directory)."""
CONDITIONAL_WRITES = "object-store.conditional-writes"
"""This library's option: ``false`` turns create-if-absent off on object stores (a best-effort check-then-write
that only a single writer per table may use, as before conditional writes existed)."""


class FilesystemOptionWarning(UserWarning):
    """A filesystem option that this library does not read."""


_S3_PREFIXES = ("s3.", "s3a.", "fs.s3a.", "fs.s3.")

# pyarrow S3FileSystem argument -> the option suffixes (after an S3 prefix) Paimon and Hadoop S3A read for it.
_S3_SUFFIXES: dict[str, tuple[str, ...]] = {
    "endpoint_override": ("endpoint",),
    "access_key": ("access-key", "access.key", "accessKeyId"),
    "secret_key": ("secret-key", "secret.key", "accessKeySecret"),
    "session_token": ("session-token", "session.token", "security-token", "security.token", "securityToken"),
    "region": ("region", "endpoint.region"),
    "path_style": ("path.style.access", "path-style-access"),
}

_OSS_KEYS: dict[str, tuple[str, ...]] = {
    "endpoint_override": ("fs.oss.endpoint",),
    "access_key": ("fs.oss.accessKeyId",),
    "secret_key": ("fs.oss.accessKeySecret",),
    "session_token": ("fs.oss.securityToken",),
    "region": ("fs.oss.region",),
}

_GCS_KEYS: dict[str, tuple[str, ...]] = {
    "root_url": ("fs.gs.storage.root.url", "gs.storage.root.url"),
    "auth_type": ("fs.gs.auth.type", "gs.auth.type"),
    "project_id": ("fs.gs.project.id", "gs.project.id", "gcs.project-id"),
}

_AZURE_KEYS: dict[str, tuple[str, ...]] = {
    "account_name": ("fs.azure.account.name", "azure.account.name"),
    "account_key": ("fs.azure.account.key", "azure.account.key"),
    "endpoint": ("fs.azure.endpoint", "azure.endpoint"),
}
# Hadoop's per-account key names, which Paimon passes through (``azure.`` becomes ``fs.azure.``).
_AZURE_ACCOUNT_KEY = re.compile(r"^(fs\.)?azure\.account\.key\.(?P<account>[^.]+)\.(dfs|blob)\.core\.windows\.net$")

DEPRECATED_OPTIONS = {"s3.path-style-access": "s3.path.style.access"}
"""Former spellings of this library -> Paimon's documented name."""


def _s3_keys() -> dict[str, tuple[str, ...]]:
    return {arg: tuple(p + s for p in _S3_PREFIXES for s in suffixes) for arg, suffixes in _S3_SUFFIXES.items()}


def known_options() -> set[str]:
    """Every option name a filesystem of this library reads."""
    names = {key for keys in _s3_keys().values() for key in keys}
    for table in (_OSS_KEYS, _GCS_KEYS, _AZURE_KEYS):
        names.update(key for keys in table.values() for key in keys)
    names.update((LOCK_ENABLED, LOCK_DIR, CONDITIONAL_WRITES))
    return names


def flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    """A true/false option; anything else is refused naming the option."""
    value = options.get(key)
    if value in (None, ""):
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidOptionError(f"filesystem option {key}: {value!r} is not 'true' or 'false'")
    return text == "true"


def _first(options: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = options.get(key)
        if value not in (None, ""):
            return str(value)
    return None


def warn_about(options: Mapping[str, str]) -> None:
    """Warn (naming the keys, never the values) about deprecated spellings and options nothing reads."""
    for old, new in DEPRECATED_OPTIONS.items():
        if old in options:
            warnings.warn(f"filesystem option {old!r} is deprecated: use Paimon's name {new!r}", FutureWarning,
                          stacklevel=3)
    unknown = sorted(k for k in set(options) - known_options() if not _AZURE_ACCOUNT_KEY.match(k))
    if unknown:
        warnings.warn(f"filesystem option(s) {', '.join(repr(k) for k in unknown)} are not read by airflow-paimon "
                      f"and are ignored; the options it reads include {', '.join(sorted(_PAIMON_NAMES))}",
                      FilesystemOptionWarning, stacklevel=3)


_PAIMON_NAMES = ("s3.endpoint", "s3.access-key", "s3.secret-key", "s3.session-token", "s3.region",
                 "s3.path.style.access", "fs.oss.endpoint", "fs.oss.accessKeyId", "fs.oss.accessKeySecret",
                 "fs.gs.storage.root.url", "fs.gs.auth.type", "fs.gs.project.id", "fs.azure.account.key",
                 "fs.azure.endpoint")


def s3_filesystem_arguments(options: Mapping[str, str], scheme: str) -> dict[str, Any]:
    """Keyword arguments of ``pyarrow.fs.S3FileSystem`` for a warehouse of ``scheme`` (s3, s3a, s3n or oss)."""
    if scheme == "oss":
        kwargs: dict[str, Any] = {}
        for arg, keys in _OSS_KEYS.items():
            value = _first(options, keys)
            if value is not None:
                kwargs[arg] = value
        kwargs["force_virtual_addressing"] = True  # OSS serves buckets on virtual hosts only
    else:
        kwargs = {}
        for arg, keys in _s3_keys().items():
            value = _first(options, keys)
            if value is None:
                continue
            if arg == "path_style":
                if value.strip().lower() not in ("true", "false"):
                    raise InvalidOptionError(
                        f"filesystem option s3.path.style.access: {value!r} is not 'true' or 'false'")
                kwargs["force_virtual_addressing"] = value.strip().lower() != "true"
            else:
                kwargs[arg] = value
    endpoint = kwargs.get("endpoint_override")
    if endpoint is None and scheme != "oss":
        # As AWS's own SDKs (and obstore) do; pyarrow's S3 filesystem does not read these.
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
        if endpoint is not None:
            kwargs["endpoint_override"] = endpoint
    if endpoint is not None:
        if endpoint.startswith("http://"):
            kwargs["scheme"] = "http"
        kwargs["endpoint_override"] = endpoint.split("://", 1)[-1]
    return kwargs


@dataclass(frozen=True)
class GcsSettings:
    """How to reach a ``gs://`` warehouse; pyarrow's GCS filesystem (data files) and obstore (metadata, conditional
    writes) are both built from it, so they talk to the same service the same way."""

    root_url: str | None
    anonymous: bool
    project_id: str | None

    def pyarrow_arguments(self) -> dict[str, Any]:
        """Keyword arguments of ``pyarrow.fs.GcsFileSystem``."""
        kwargs: dict[str, Any] = {"anonymous": self.anonymous}
        if self.root_url:
            scheme, _, authority = self.root_url.rstrip("/").partition("://")
            kwargs.update(scheme=scheme, endpoint_override=authority)
        if self.project_id:
            kwargs["project_id"] = self.project_id
        return kwargs


def gcs_settings(options: Mapping[str, str]) -> GcsSettings:
    """Without options, the root URL is ``GOOGLE_BASE_URL``, as obstore reads it (so both clients agree)."""
    auth = (_first(options, _GCS_KEYS["auth_type"]) or "").strip().upper()
    if auth and auth not in _GCS_AUTH_TYPES:
        raise InvalidOptionError(f"filesystem option fs.gs.auth.type: {auth!r} is not one of "
                                 f"{', '.join(sorted(_GCS_AUTH_TYPES))}")
    root_url = _first(options, _GCS_KEYS["root_url"]) or os.environ.get("GOOGLE_BASE_URL") or None
    return GcsSettings(root_url, auth == "UNAUTHENTICATED", _first(options, _GCS_KEYS["project_id"]))


# The GCS connector's authentication types; only UNAUTHENTICATED changes anything here (the others are what the
# environment's credentials already give).
_GCS_AUTH_TYPES = {"UNAUTHENTICATED", "APPLICATION_DEFAULT", "COMPUTE_ENGINE", "SERVICE_ACCOUNT_JSON_KEYFILE",
                   "USER_CREDENTIALS", "ACCESS_TOKEN_PROVIDER"}


@dataclass(frozen=True)
class AzureSettings:
    """How to reach an Azure warehouse's container, for pyarrow's Azure filesystem and for obstore alike."""

    container: str
    account_name: str | None
    account_key: str | None
    endpoint: str | None

    def pyarrow_arguments(self) -> dict[str, Any]:
        """Keyword arguments of ``pyarrow.fs.AzureFileSystem``: an endpoint of one's own (an emulator) serves the
        blob and the data-lake API on one address."""
        if not self.account_name:
            raise InvalidOptionError("Azure warehouse without an account: use abfs://container@ACCOUNT.dfs.core."
                                     "windows.net/... or the filesystem option fs.azure.account.name")
        kwargs: dict[str, Any] = {"account_name": self.account_name}
        if self.account_key:
            kwargs["account_key"] = self.account_key
        if self.endpoint:
            scheme, _, rest = self.endpoint.partition("://")
            authority = rest.split("/", 1)[0]
            kwargs.update(blob_storage_authority=authority, blob_storage_scheme=scheme,
                          dfs_storage_authority=authority, dfs_storage_scheme=scheme)
        return kwargs


def azure_settings(options: Mapping[str, str], bucket: str) -> AzureSettings:
    """`bucket` is the URI's authority: ``container`` or ``container@account.dfs.core.windows.net``. What the
    options leave out comes from ``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY`` and
    ``AZURE_STORAGE_ENDPOINT``, the variables obstore reads, so pyarrow's filesystem and obstore agree."""
    container, _, host = bucket.partition("@")
    env = os.environ
    account = (host.split(".", 1)[0] if host else _first(options, _AZURE_KEYS["account_name"])) or \
        env.get("AZURE_STORAGE_ACCOUNT_NAME") or None
    key = _first(options, _AZURE_KEYS["account_key"])
    for name, value in options.items():
        found = _AZURE_ACCOUNT_KEY.match(name)
        if found and found.group("account") == account and value:
            key = str(value)
    endpoint = _first(options, _AZURE_KEYS["endpoint"]) or env.get("AZURE_STORAGE_ENDPOINT") or None
    return AzureSettings(container, account, key or env.get("AZURE_STORAGE_ACCOUNT_KEY") or None, endpoint)
