"""One Spark standalone cluster (a master and two workers on 127.0.0.1) for the whole test session, the local S3
server (moto's server mode, also one per session), and the Airflow fixtures of tests/airflow (a private
AIRFLOW_HOME on SQLite)."""

from __future__ import annotations

import pytest

from tests.airflow.conftest import airflow_db, airflow_home, pytest_sessionfinish  # noqa: F401
from tests.cluster.standalone import StandaloneCluster, free_port
from tests.s3_server import s3_server  # noqa: F401


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), port=free_port(), webui_port=free_port())
    try:
        yield cluster.start(workers=2, cores=1, memory="1g")
    finally:
        cluster.stop()
