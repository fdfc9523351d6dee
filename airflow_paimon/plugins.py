"""The provider's Airflow plugin: the tag-period timetable, the "Paimon tables" view and the operators' link to it.

Airflow loads it from the provider's metadata (``plugins`` in ``get_provider_info``) and through the
``airflow.plugins`` entry point, so DAGs that use ``TagPeriodTimetable`` can be serialized by the DAG processor
and deserialized by the scheduler and the API server without any file in the plugins folder, and the API server
mounts the tables view (``/paimon``) and lists it in the UI's Browse menu.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_paimon.timetables.tag_period import TagPeriodTimetable
from airflow_paimon.ui.lazy_app import LazyTablesApp
from airflow_paimon.ui.links import PaimonTableLink
from airflow_paimon.ui.urls import URL_PREFIX

TABLES_VIEW_ROUTE = "paimon-tables"


class AirflowPaimonPlugin(AirflowPlugin):
    """Apache Paimon upkeep: the tag-period timetable, the tables view and the operators' table link."""

    name = "airflow_paimon"
    timetables = [TagPeriodTimetable]
    fastapi_apps = [{"app": LazyTablesApp(), "url_prefix": URL_PREFIX, "name": "Paimon tables"}]
    external_views = [{
        "name": "Paimon tables",
        "href": f"{URL_PREFIX}/",
        "url_route": TABLES_VIEW_ROUTE,
        "destination": "nav",
        "category": "browse",
    }]
    operator_extra_links = [PaimonTableLink()]
