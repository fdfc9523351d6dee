"""docker-compose.yaml cannot run here (no Docker engine), so it is checked statically."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DEPENDENCIES = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower(): d for d in PYPROJECT["project"]["dependencies"]}


def services() -> dict:
    return COMPOSE["services"]


def test_every_dependency_and_volume_exists():
    named_volumes = set(COMPOSE.get("volumes") or {})
    for name, svc in services().items():
        deps = svc.get("depends_on") or {}
        for dep in deps if isinstance(deps, (list, dict)) else []:
            assert dep in services(), f"{name} depends on unknown service {dep}"
        for vol in svc.get("volumes") or []:
            source = vol.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts missing path {source}"
            else:
                assert source in named_volumes, f"{name} uses undeclared volume {source}"
        build = svc.get("build")
        if build:
            assert (ROOT / build["context"] / build["dockerfile"]).exists()


def test_the_airflow_3_services_are_all_there():
    commands = {svc.get("command") for svc in services().values() if isinstance(svc.get("command"), str)}
    assert {"api-server", "scheduler", "dag-processor", "triggerer"} <= commands
    assert "airflow-init" in services() and "postgres" in services()
    assert "postgresql" in services()["airflow-scheduler"]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]


def test_image_versions_match_the_package_pins():
    airflow_image = services()["airflow-scheduler"]["image"]
    build_args = services()["airflow-scheduler"]["build"]["args"]
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    airflow_version = build_args["AIRFLOW_VERSION"]
    assert airflow_version in SpecifierSet(DEPENDENCIES["apache-airflow"].split("apache-airflow", 1)[1])
    assert airflow_version == version("apache-airflow"), "the image runs the Airflow the tests run"
    assert airflow_image.endswith(airflow_version) and f"AIRFLOW_VERSION={airflow_version}" in dockerfile
    assert "openjdk-17" in dockerfile, "spark-submit needs Java in the Airflow image"
    # Spark master and worker run the image whose Spark comes from the pyspark pin.
    pyspark_pin = DEPENDENCIES["pyspark"].split("==", 1)[1]
    assert pyspark_pin == version("pyspark")
    for name in ("spark-master", "spark-worker"):
        assert services()[name]["image"] == airflow_image
        assert "spark-class" in " ".join(services()[name]["command"])
    assert "spark://spark-master:7077" in " ".join(services()["spark-worker"]["command"])


def _created_connections() -> dict[str, str]:
    script = "\n".join(services()["airflow-init"]["command"])
    return dict(re.findall(r"airflow connections add (\S+) --conn-type (\S+)", script))


def test_init_creates_the_connections_the_dags_use():
    created = _created_connections()
    assert created == {"spark_default": "spark", "paimon_default": "paimon", "paimon_s3": "paimon"}
    script = "\n".join(services()["airflow-init"]["command"])
    assert "spark://spark-master --conn-port 7077" in script
    assert '"warehouse": "/opt/warehouse"' in script
    for name in ("airflow-scheduler", "spark-worker"):
        assert "warehouse:/opt/warehouse" in services()[name]["volumes"]


def test_the_s3_profile_puts_the_warehouse_on_the_object_store():
    """`--profile s3` adds MinIO and creates its bucket; `paimon_s3` names that bucket with Paimon's own option
    names and the store's credentials; PAIMON_CONN_ID switches the example DAGs to it."""
    store, init = services()["minio"], services()["minio-init"]
    assert store["profiles"] == init["profiles"] == ["s3"]
    assert not any("s3" in (svc.get("profiles") or []) for name, svc in services().items()
                   if name not in ("minio", "minio-init")), "only the store's services are optional"
    assert init["depends_on"]["minio"]["condition"] == "service_healthy" and "healthcheck" in store
    assert "object-store:/data" in store["volumes"]
    script = "\n".join(services()["airflow-init"]["command"])
    login, password, extra = re.search(
        r"connections add paimon_s3 --conn-type paimon --conn-login (\S+) --conn-password (\S+) \\\s*"
        r"--conn-extra '([^']+)'", script).groups()
    assert (login, password) == (store["environment"]["MINIO_ROOT_USER"], store["environment"]["MINIO_ROOT_PASSWORD"])
    extra = json.loads(extra)
    bucket = extra["warehouse"].removeprefix("s3://").split("/")[0]
    assert f"store/{bucket}" in " ".join(init["command"]) and "mc mb" in " ".join(init["command"])
    assert extra["s3.endpoint"] == "http://minio:9000" and extra["s3.path.style.access"] == "true"
    assert services()["airflow-scheduler"]["environment"]["PAIMON_CONN_ID"] == "${PAIMON_CONN_ID:-paimon_default}"


@pytest.mark.airflow
def test_dags_use_only_connections_compose_creates():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors
    used = set()
    for dag in bag.dags.values():
        for task in dag.tasks:
            for attr in ("paimon_conn_id", "conn_id"):
                value = getattr(task, attr, None) or getattr(task, f"_{attr}", None)
                if isinstance(value, str):
                    # A templated id comes from the DAG's params: its default is what a run uses.
                    m = re.fullmatch(r"\{\{\s*params\.(\w+)\s*\}\}", value.strip())
                    used.add(dag.params[m.group(1)] if m else value)
    assert used and used <= set(_created_connections())
