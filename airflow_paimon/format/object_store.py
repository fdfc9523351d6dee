"""Conditional writes on object stores (S3 and S3-compatible servers, GCS, Azure) through obstore.

pyarrow's filesystems stream data files and manifests well but cannot create an object only if it is absent, nor
replace it only if nobody changed it since it was read. A Paimon commit rests on the first (two writers racing for
``snapshot-N``: exactly one may win), a consumer advance on the second. obstore (Rust's ``object_store``) sends
``If-None-Match: *`` and ``If-Match: <e-tag>`` on S3 and the equivalent preconditions on GCS and Azure; a store
that answers 412 (precondition failed) or 409 (a concurrent conditional write in flight) has told this writer it
lost the race: the caller re-reads and retries, as on a local disk.

A store may also ignore the precondition (old S3-compatible servers do) and overwrite silently. `probe` finds out
once per store with two creates of one scratch object: the second must be refused.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import obstore
from obstore.exceptions import AlreadyExistsError, GenericError, NotFoundError, PreconditionError
from obstore.store import AzureStore, GCSStore, S3Store

from .store_options import azure_settings, gcs_settings, s3_filesystem_arguments

if TYPE_CHECKING:
    from obstore import UpdateVersion
    from obstore.store import AzureConfig, ClientConfig, GCSConfig, S3Config

__all__ = ["OBJECT_STORE_SCHEMES", "ConditionalStore", "ObjectVersion", "split_uri"]

OBJECT_STORE_SCHEMES = ("s3", "s3a", "s3n", "oss", "gs", "gcs", "abfs", "abfss", "az")

# What a store answers a conditional write that lost the race with, as obstore reports it when it does not map
# it: the HTTP status with its reason phrase, or S3's error code. Never a bare number: the message also holds the
# object's URL, whose names and uuids hold any digits (a snapshot-412 whose PUT failed is no lost race).
_LOST_RACE = re.compile(r"\b(?:412 Precondition Failed|409 Conflict|PreconditionFailed|ConditionalRequestConflict)\b")


def split_uri(uri: str) -> tuple[str, str, str]:
    """``scheme://bucket/key`` -> (scheme, bucket, key); an Azure ``abfs://container@account.host/key`` keeps
    ``container@account.host`` as its bucket."""
    scheme, rest = uri.split("://", 1)
    bucket, _, key = rest.partition("/")
    return scheme, bucket, key


def _lost_race(error: Exception) -> bool:
    if isinstance(error, (AlreadyExistsError, PreconditionError)):
        return True
    return isinstance(error, GenericError) and _LOST_RACE.search(str(error)) is not None


def _s3_config(options: Mapping[str, str], scheme: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """obstore's S3 configuration from the same options pyarrow's S3 filesystem is built from."""
    args = s3_filesystem_arguments(options, scheme)
    config: dict[str, Any] = {"conditional_put": "etag"}
    client: dict[str, Any] = {}
    for pyarrow_name, obstore_name in (("access_key", "access_key_id"), ("secret_key", "secret_access_key"),
                                       ("session_token", "session_token"), ("region", "region")):
        if pyarrow_name in args:
            config[obstore_name] = args[pyarrow_name]
    if "endpoint_override" in args:
        http = args.get("scheme") == "http"
        config["endpoint"] = ("http://" if http else "https://") + args["endpoint_override"]
        if http:
            client["allow_http"] = True
        config.setdefault("region", "us-east-1")
    if "force_virtual_addressing" in args:
        config["virtual_hosted_style_request"] = bool(args["force_virtual_addressing"])
    return config, client


def _http_client(url: str | None) -> dict[str, Any]:
    return {"allow_http": True} if url and url.startswith("http://") else {}


def _gcs_store(bucket: str, options: Mapping[str, str]) -> GCSStore:
    settings = gcs_settings(options)
    config: dict[str, Any] = {}
    if settings.root_url:
        config["base_url"] = settings.root_url.rstrip("/")
    if settings.anonymous:
        # object_store's own way to reach an emulator without signing: `skip_signature` still fetches a token
        # from the metadata server before a DELETE.
        config["service_account_key"] = json.dumps({
            "gcs_base_url": config.get("base_url", "https://storage.googleapis.com"), "disable_oauth": True,
            "client_email": "", "private_key": "", "private_key_id": ""})
    return GCSStore(bucket, config=cast("GCSConfig", config),
                    client_options=cast("ClientConfig", _http_client(settings.root_url)))


def _azure_store(bucket: str, options: Mapping[str, str]) -> AzureStore:
    settings = azure_settings(options, bucket)
    config: dict[str, Any] = {}
    for name, value in (("account_name", settings.account_name), ("account_key", settings.account_key),
                        ("endpoint", settings.endpoint)):
        if value:
            config[name] = value
    return AzureStore(settings.container, config=cast("AzureConfig", config),
                      client_options=cast("ClientConfig", _http_client(settings.endpoint)))


@dataclass(frozen=True)
class ObjectVersion:
    """What a compare-and-swap compares: S3 and Azure the e-tag, GCS the object's generation (its `version`)."""

    e_tag: str | None
    version: str | None


class ConditionalStore:
    """The create-if-absent and compare-and-swap writes of one bucket (or container)."""

    def __init__(self, scheme: str, bucket: str, options: Mapping[str, str]):
        self.scheme = scheme
        self.bucket = bucket
        self.store: Any
        if scheme in OBJECT_STORE_SCHEMES[:4]:
            config, client = _s3_config(options, scheme)
            self.store = S3Store(bucket, config=cast("S3Config", config), client_options=cast("ClientConfig", client))
        elif scheme in ("gs", "gcs"):
            self.store = _gcs_store(bucket, options)
        elif scheme in ("abfs", "abfss", "az"):
            self.store = _azure_store(bucket, options)
        else:
            raise ValueError(f"no conditional writes for {scheme}:// warehouses")

    def _key(self, uri: str) -> str:
        return split_uri(uri)[2]

    def create(self, uri: str, data: bytes) -> bool:
        """Create the object only if absent; False when it exists (or a racing create won)."""
        try:
            obstore.put(self.store, self._key(uri), data, mode="create")
        except Exception as e:  # obstore raises its own hierarchy; only a lost race is an answer here
            if _lost_race(e):
                return False
            raise
        return True

    def read(self, uri: str) -> bytes:
        """One GET; FileNotFoundError when absent (as pyarrow raises)."""
        try:
            return bytes(obstore.get(self.store, self._key(uri)).bytes())
        except NotFoundError:
            raise FileNotFoundError(uri) from None

    def exists(self, uri: str) -> bool:
        """One HEAD: whether an object has this name."""
        try:
            obstore.head(self.store, self._key(uri))
        except (NotFoundError, FileNotFoundError):
            return False
        return True

    def write(self, uri: str, data: bytes) -> None:
        """One PUT: an object appears whole or not at all, so no temporary name is needed."""
        obstore.put(self.store, self._key(uri), data)

    def delete(self, uri: str) -> None:
        """One DELETE; an absent object is no error (S3 answers 204 either way)."""
        try:
            obstore.delete(self.store, self._key(uri))
        except (NotFoundError, FileNotFoundError):
            pass

    def read_versioned(self, uri: str) -> tuple[bytes, ObjectVersion] | None:
        """The object's bytes and its version; None when absent."""
        try:
            result = obstore.get(self.store, self._key(uri))
        except (NotFoundError, FileNotFoundError):
            return None
        return bytes(result.bytes()), ObjectVersion(result.meta.get("e_tag"), result.meta.get("version"))

    def replace(self, uri: str, data: bytes, version: ObjectVersion) -> bool:
        """Overwrite the object only if it is still at `version`; False when another writer changed it."""
        mode: dict[str, str] = {k: v for k, v in (("e_tag", version.e_tag), ("version", version.version)) if v}
        try:
            obstore.put(self.store, self._key(uri), data, mode=cast("UpdateVersion", mode))
        except Exception as e:
            if _lost_race(e):
                return False
            raise
        return True

    def subdirs(self, directory_uri: str) -> list[str]:
        """The names of the "folders" right below `directory_uri`: the common prefixes of one delimited listing.
        pyarrow's GCS filesystem lists only folders that have a marker object, which nothing here writes."""
        key = self._key(directory_uri).rstrip("/")
        listed = obstore.list_with_delimiter(self.store, f"{key}/" if key else None)
        return [prefix.rstrip("/").rsplit("/", 1)[-1] for prefix in listed["common_prefixes"]]

    def probe(self, directory_uri: str) -> bool:
        """True when the store refuses a second create of one object (it honours create-if-absent)."""
        key = f"{self._key(directory_uri).rstrip('/')}/.conditional-write-probe-{uuid.uuid4().hex}"
        uri = f"{self.scheme}://{self.bucket}/{key}"
        try:
            if not self.create(uri, b"1"):
                return False
            return not self.create(uri, b"2")
        finally:
            self.delete(uri)   # absent when the first create failed: its error is the one to report
