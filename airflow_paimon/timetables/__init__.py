"""Airflow timetables of the Paimon provider (registered through ``airflow_paimon.plugins``)."""

from __future__ import annotations

from airflow_paimon.timetables.tag_period import TagPeriodTimetable

__all__ = ["TagPeriodTimetable"]
