"""The provider's Airflow plugin: registers the tag-period timetable.

Airflow loads it from the provider's metadata (``plugins`` in ``get_provider_info``), so DAGs that use
``TagPeriodTimetable`` can be serialized by the DAG processor and deserialized by the scheduler and the
API server without any file in the plugins folder.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_paimon.timetables.tag_period import TagPeriodTimetable


class AirflowPaimonPlugin(AirflowPlugin):
    """Apache Paimon upkeep: the tag-period timetable."""

    name = "airflow_paimon"
    timetables = [TagPeriodTimetable]
