"""The provider's metadata as Airflow reads it: schema, entry point, CLI, connection form and plugin."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata, resources

import pytest

from airflow_paimon import __version__
from airflow_paimon.provider import get_provider_info

from .conftest import airflow_env, run_airflow

pytestmark = pytest.mark.airflow


def _schema() -> dict:
    return json.loads((resources.files("airflow") / "provider_info.schema.json").read_text())


def test_provider_info_validates_against_airflows_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema()
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(get_provider_info(), schema, cls=jsonschema.Draft7Validator)


def test_provider_info_contents():
    info = get_provider_info()
    assert info["package-name"] == "airflow-paimon"
    assert info["name"] == "Apache Paimon"
    assert info["description"]
    assert info["versions"] == [__version__] == [metadata.version("airflow-paimon")]
    modules = {
        key: [m for entry in info[key] for m in entry["python-modules"]]
        for key in ("hooks", "operators", "sensors", "triggers")
    }
    assert modules == {
        "hooks": ["airflow_paimon.hooks.paimon"],
        "operators": [
            "airflow_paimon.operators.tags",
            "airflow_paimon.operators.expire",
            "airflow_paimon.operators.merge",
            "airflow_paimon.operators.maintenance",
        ],
        "sensors": ["airflow_paimon.sensors.tags", "airflow_paimon.sensors.changes"],
        "triggers": ["airflow_paimon.triggers.tags", "airflow_paimon.triggers.changes"],
    }
    integrations = {i["integration-name"] for i in info["integrations"]}
    for key in ("hooks", "operators", "sensors", "triggers"):
        assert {entry["integration-name"] for entry in info[key]} <= integrations
    [conn] = info["connection-types"]
    assert conn["connection-type"] == "paimon"
    assert conn["hook-class-name"] == "airflow_paimon.hooks.paimon.PaimonHook"
    assert "warehouse" in conn["conn-fields"]
    assert info["plugins"] == [{"name": "airflow_paimon", "plugin-class": "airflow_paimon.plugins.AirflowPaimonPlugin"}]


def test_declared_classes_match_the_code():
    from airflow_paimon.hooks.paimon import PaimonHook
    from airflow_paimon.plugins import AirflowPaimonPlugin
    from airflow_paimon.timetables import TagPeriodTimetable

    [conn] = get_provider_info()["connection-types"]
    assert PaimonHook.conn_type == conn["connection-type"]
    assert PaimonHook.hook_name == conn["hook-name"]
    assert (PaimonHook.conn_name_attr, PaimonHook.default_conn_name) == ("paimon_conn_id", "paimon_default")
    assert AirflowPaimonPlugin.name == get_provider_info()["plugins"][0]["name"]
    assert TagPeriodTimetable in AirflowPaimonPlugin.timetables


def test_entry_point_is_installed():
    eps = [ep for ep in metadata.entry_points(group="apache_airflow_provider") if ep.dist.name == "airflow-paimon"]
    assert [ep.value for ep in eps] == ["airflow_paimon.provider:get_provider_info"]
    assert eps[0].load()() == get_provider_info()


def test_providers_manager_reads_hook_form_and_plugin():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert manager.providers["airflow-paimon"].version == metadata.version("airflow-paimon")
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    hook = ProvidersManagerTaskRuntime().hooks["paimon"]
    assert hook is not None
    assert hook.hook_class_name == "airflow_paimon.hooks.paimon.PaimonHook"
    assert hook.connection_id_attribute_name == "paimon_conn_id"
    assert hook.hook_name == "Apache Paimon"
    widgets = manager.connection_form_widgets
    assert {"extra__paimon__warehouse", "extra__paimon__secret_key_option"} <= set(widgets)
    assert widgets["extra__paimon__warehouse"].field["schema"]["title"] == "Warehouse"
    behaviour = manager.field_behaviours["paimon"]
    assert behaviour["hidden_fields"] == ["port"]
    assert behaviour["relabeling"]["password"] == "Secret key"
    plugins = {p.plugin_class: p for p in manager.plugins}
    assert plugins["airflow_paimon.plugins.AirflowPaimonPlugin"].provider_name == "airflow-paimon"


def test_cli_lists_the_provider_and_hook():
    got = json.loads(run_airflow("providers", "get", "airflow-paimon", "-o", "json").stdout)
    assert got == [{"Provider": "airflow-paimon", "Version": metadata.version("airflow-paimon")}]
    full = json.loads(run_airflow("providers", "get", "airflow-paimon", "--full", "-o", "json").stdout)
    assert full[0]["package-name"] == "airflow-paimon"
    hooks = json.loads(run_airflow("providers", "hooks", "-o", "json").stdout)
    [paimon] = [h for h in hooks if h["connection_type"] == "paimon"]
    assert paimon["class"] == "airflow_paimon.hooks.paimon.PaimonHook"
    assert paimon["package_name"] == "airflow-paimon"
    assert paimon["hook_name"] == "Apache Paimon"


_SERIALIZE_DAG = textwrap.dedent(
    """
    import json, pendulum
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow_paimon.timetables import TagPeriodTimetable

    timetable = TagPeriodTimetable("02:30", "2d", "Europe/Berlin")
    with DAG("tags", schedule=timetable, start_date=pendulum.datetime(2026, 11, 1, tz="Europe/Berlin")) as dag:
        pass
    data = DagSerialization.to_dict(dag)
    back = DagSerialization.from_dict(json.loads(json.dumps(data, default=str)))
    assert back.timetable == timetable, back.timetable
    infos = list(back.iter_dagrun_infos_between(
        pendulum.datetime(2026, 11, 1, tz="Europe/Berlin"), pendulum.datetime(2026, 11, 6, tz="Europe/Berlin")))
    print(json.dumps({
        "summary": back.timetable.summary,
        "description": back.timetable.description,
        "runs": [[i.data_interval.start.isoformat(), i.run_after.isoformat()] for i in infos],
    }))
    """
)


def _serialize_in_subprocess(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _SERIALIZE_DAG], env=airflow_env(**env), capture_output=True, text=True, timeout=300
    )


def test_dag_with_timetable_serializes_through_the_provider_plugin():
    """Airflow registers the provider's plugin (and so the timetable) when it discovers providers eagerly."""
    result = _serialize_in_subprocess(AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="False")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["summary"] == "tag every 2d at 02:30 Europe/Berlin"
    # backfill-style iteration on the deserialized DAG: Berlin-midnight periods aligned to the epoch
    assert out["runs"] == [
        ["2026-10-31T23:00:00+00:00", "2026-11-03T01:30:00+00:00"],
        ["2026-11-02T23:00:00+00:00", "2026-11-05T01:30:00+00:00"],
        ["2026-11-04T23:00:00+00:00", "2026-11-07T01:30:00+00:00"],
    ]


def test_dag_with_timetable_serializes_with_default_settings():
    """With Airflow's default ``lazy_discover_providers = True`` plugins listed in provider info are not
    loaded (airflow.plugins_manager only loads them when providers are discovered eagerly); the plugin must
    also be declared as an ``airflow.plugins`` entry point, as Airflow's own providers do."""
    declared = [ep for ep in metadata.entry_points(group="airflow.plugins") if ep.value.startswith("airflow_paimon.")]
    if not declared:
        pytest.xfail(
            'pyproject.toml lacks [project.entry-points."airflow.plugins"] '
            'airflow_paimon = "airflow_paimon.plugins:AirflowPaimonPlugin" (reinstall after adding it)'
        )
    result = _serialize_in_subprocess()
    assert result.returncode == 0, result.stderr
