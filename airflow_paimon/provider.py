"""The provider's metadata, read by Airflow's providers manager through the ``apache_airflow_provider``
entry point (``provider_info = "airflow_paimon.provider:get_provider_info"`` in pyproject.toml).

It must stay cheap to import: no Airflow imports, no format library. The dictionary follows Airflow's
runtime schema (``airflow/provider_info.schema.json``); the connection form is declared here
(``conn-fields`` and ``ui-field-behaviour``, read by Airflow 3.2+ without importing the hook).
"""

from __future__ import annotations

from typing import Any

from airflow_paimon import __version__

PACKAGE_NAME = "airflow-paimon"
INTEGRATION = "Apache Paimon"


def _string_field(label: str, description: str, **schema: Any) -> dict[str, Any]:
    return {"label": label, "description": description, "schema": {"type": ["string", "null"], **schema}}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE_NAME,
        "name": INTEGRATION,
        "description": (
            "`Apache Paimon <https://paimon.apache.org/>`__ table upkeep: periodic tags, merges, snapshot and "
            "tag expiry, compaction, rollback and orphan-file cleanup.\n"
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://paimon.apache.org/",
                "tags": ["apache"],
            }
        ],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["airflow_paimon.hooks.paimon"]}],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_paimon.operators.tags",
                    "airflow_paimon.operators.expire",
                    "airflow_paimon.operators.merge",
                    "airflow_paimon.operators.maintenance",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_paimon.sensors.tags", "airflow_paimon.sensors.changes"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_paimon.triggers.tags", "airflow_paimon.triggers.changes"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_paimon.hooks.paimon.PaimonHook",
                "hook-name": "Apache Paimon",
                "connection-type": "paimon",
                "ui-field-behaviour": {
                    "hidden-fields": ["port"],
                    "relabeling": {
                        "host": "Warehouse root (used when Warehouse is empty)",
                        "schema": "Warehouse path below the root",
                        "login": "Access key",
                        "password": "Secret key",
                    },
                    "placeholders": {
                        "host": "s3://bucket/warehouse",
                        "login": "access key id (optional)",
                        "password": "secret key (optional)",
                        "extra": '{"s3.endpoint": "http://localhost:9000", "s3.path.style.access": "true"}',
                    },
                },
                "conn-fields": {
                    "warehouse": _string_field(
                        "Warehouse",
                        "Root of the Paimon warehouse: a local path or a filesystem URI such as "
                        "s3://bucket/warehouse. Other keys of Extra are passed to the filesystem as options.",
                    ),
                    "access_key_option": _string_field(
                        "Access key option",
                        "Filesystem option that receives Login, e.g. s3.access-key (default for s3:// "
                        "warehouses) or fs.oss.accessKeyId.",
                    ),
                    "secret_key_option": _string_field(
                        "Secret key option",
                        "Filesystem option that receives Password, e.g. s3.secret-key (default for s3:// "
                        "warehouses) or fs.oss.accessKeySecret.",
                    ),
                },
            }
        ],
        "plugins": [{"name": "airflow_paimon", "plugin-class": "airflow_paimon.plugins.AirflowPaimonPlugin"}],
    }
