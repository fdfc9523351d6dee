"""Filesystem options of object stores, under the names Paimon reads, turned into pyarrow's S3 arguments.

Paimon documents ``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ``s3.path.style.access`` and
``s3.region``; its S3 file IO also takes every ``s3.``/``s3a.``/``fs.s3a.`` key as the Hadoop S3A option of the
same suffix (``fs.s3a.access.key`` ...), and pypaimon reads ``fs.s3.accessKeyId``-style names. All of them are
accepted here. For ``oss://`` warehouses Paimon's names are ``fs.oss.endpoint``, ``fs.oss.accessKeyId``,
``fs.oss.accessKeySecret`` and ``fs.oss.securityToken``.

``s3.path-style-access``, this library's former spelling, still works but warns (FutureWarning). A key that no
rule here reads is named in a warning instead of being ignored silently: a misspelt endpoint otherwise shows up
only as an access error against AWS. Without ``s3.endpoint``, the endpoint is ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` from the environment, as AWS's SDKs read it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from .errors import InvalidOptionError

__all__ = ["CONDITIONAL_WRITES", "DEPRECATED_OPTIONS", "FilesystemOptionWarning", "LOCK_DIR", "LOCK_ENABLED", "flag",
           "s3_filesystem_arguments"]

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

DEPRECATED_OPTIONS = {"s3.path-style-access": "s3.path.style.access"}
"""Former spellings of this library -> Paimon's documented name."""


def _s3_keys() -> dict[str, tuple[str, ...]]:
    return {arg: tuple(p + s for p in _S3_PREFIXES for s in suffixes) for arg, suffixes in _S3_SUFFIXES.items()}


def known_options() -> set[str]:
    """Every option name a filesystem of this library reads."""
    names = {key for keys in _s3_keys().values() for key in keys}
    names.update(key for keys in _OSS_KEYS.values() for key in keys)
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
    unknown = sorted(set(options) - known_options())
    if unknown:
        warnings.warn(f"filesystem option(s) {', '.join(repr(k) for k in unknown)} are not read by airflow-paimon "
                      f"and are ignored; the options it reads include {', '.join(sorted(_PAIMON_NAMES))}",
                      FilesystemOptionWarning, stacklevel=3)


_PAIMON_NAMES = ("s3.endpoint", "s3.access-key", "s3.secret-key", "s3.session-token", "s3.region",
                 "s3.path.style.access", "fs.oss.endpoint", "fs.oss.accessKeyId", "fs.oss.accessKeySecret")


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
