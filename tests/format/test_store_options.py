"""Object-store options under Paimon's names reach pyarrow's S3, GCS and Azure filesystems; old spellings warn;
unknown keys are named in a warning instead of being ignored silently."""

from __future__ import annotations

import warnings

import pyarrow.fs as pafs
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.fileio import FileIO
from airflow_paimon.format.store_options import FilesystemOptionWarning, azure_settings, gcs_settings


def s3_settings(warehouse: str, options: dict[str, str]) -> dict:
    """The settings the pyarrow S3 filesystem was built with (what it will use against the store)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none expected here
        io = FileIO(warehouse, options)
    return io.fs.__reduce__()[1][0]


def test_paimon_documented_s3_names():
    settings = s3_settings("s3://bucket/wh", {
        "s3.endpoint": "http://minio:9000", "s3.access-key": "AK", "s3.secret-key": "SK",
        "s3.path.style.access": "false", "s3.region": "eu-west-1", "s3.session-token": "TOKEN",
    })
    assert (settings["endpoint_override"], settings["scheme"]) == ("minio:9000", "http")
    assert (settings["access_key"], settings["secret_key"], settings["session_token"]) == ("AK", "SK", "TOKEN")
    assert settings["region"] == "eu-west-1"
    assert settings["force_virtual_addressing"] is True  # path-style access off: bucket on the host name


@pytest.mark.parametrize("options", [
    {"fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK", "fs.s3a.endpoint": "https://s3.example",
     "fs.s3a.path.style.access": "TRUE", "fs.s3a.endpoint.region": "r1"},
    {"s3a.access-key": "AK", "s3a.secret-key": "SK", "s3a.endpoint": "https://s3.example", "s3.region": "r1"},
    {"fs.s3.accessKeyId": "AK", "fs.s3.accessKeySecret": "SK", "fs.s3.endpoint": "https://s3.example",
     "fs.s3.region": "r1"},
])
def test_hadoop_and_pypaimon_spellings_paimon_also_reads(options):
    settings = s3_settings("s3a://bucket/wh", options)
    assert (settings["access_key"], settings["secret_key"]) == ("AK", "SK")
    assert (settings["endpoint_override"], settings["scheme"], settings["region"]) == ("s3.example", "https", "r1")
    assert settings["force_virtual_addressing"] is False


def test_oss_names():
    settings = s3_settings("oss://bucket/wh", {"fs.oss.endpoint": "oss-cn-hangzhou.aliyuncs.com",
                                               "fs.oss.accessKeyId": "AK", "fs.oss.accessKeySecret": "SK"})
    assert (settings["endpoint_override"], settings["access_key"], settings["secret_key"]) == (
        "oss-cn-hangzhou.aliyuncs.com", "AK", "SK")
    assert settings["force_virtual_addressing"] is True


def test_the_former_spelling_still_works_with_a_deprecation_warning():
    with pytest.warns(FutureWarning, match="'s3.path-style-access' is deprecated: use Paimon's name "
                                           "'s3.path.style.access'"):
        io = FileIO("s3://bucket/wh", {"s3.path-style-access": "false", "s3.endpoint": "http://minio:9000"})
    assert io.fs.__reduce__()[1][0]["force_virtual_addressing"] is True


def test_unknown_options_are_named_not_their_values(tmp_path):
    with pytest.warns(FilesystemOptionWarning) as caught:
        Catalog(str(tmp_path), options={"s3.endpiont": "http://minio:9000", "s3.secret-key": "TOPSECRET"})
    [warning] = caught
    text = str(warning.message)
    assert "'s3.endpiont'" in text and "s3.endpoint" in text
    assert "TOPSECRET" not in text and "minio" not in text


def test_a_bad_boolean_is_refused():
    with pytest.raises(InvalidOptionError, match="s3.path.style.access: 'yes'"):
        FileIO("s3://bucket/wh", {"s3.path.style.access": "yes"})


def test_gcs_connector_names_reach_pyarrow_and_obstore_alike():
    options = {"fs.gs.storage.root.url": "http://127.0.0.1:4443/", "fs.gs.auth.type": "unauthenticated",
               "gcs.project-id": "lake"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        io = FileIO("gs://bucket/wh", options)
    assert isinstance(io.fs, pafs.GcsFileSystem)
    assert gcs_settings(options).pyarrow_arguments() == {
        "anonymous": True, "scheme": "http", "endpoint_override": "127.0.0.1:4443", "project_id": "lake"}
    with pytest.raises(InvalidOptionError, match="fs.gs.auth.type"):
        gcs_settings({"fs.gs.auth.type": "NONE"})


def test_azure_account_from_the_uri_and_its_key_under_hadoops_name(monkeypatch):
    for name in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    options = {"fs.azure.account.key.lake.dfs.core.windows.net": "KEY",
               "fs.azure.account.key.other.dfs.core.windows.net": "NOT-THIS", "fs.azure.endpoint": "http://az:10000/lake"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        io = FileIO("abfs://box@lake.dfs.core.windows.net/wh", options)
    assert io.fs_path("abfs://box@lake.dfs.core.windows.net/wh/db.db/t") == "box/wh/db.db/t"
    settings = azure_settings(options, "box@lake.dfs.core.windows.net")
    assert (settings.container, settings.account_name, settings.account_key) == ("box", "lake", "KEY")
    assert settings.pyarrow_arguments()["blob_storage_authority"] == "az:10000"
    # az://container/... names no account: the option (or AZURE_STORAGE_ACCOUNT_NAME) does
    assert azure_settings({"fs.azure.account.name": "lake", "azure.account.key": "K"}, "box").account_key == "K"
    with pytest.raises(InvalidOptionError, match="without an account"):
        azure_settings({}, "box").pyarrow_arguments()
