"""Sensors of the Paimon provider."""

from __future__ import annotations

from airflow_paimon.sensors.changes import ChangesSensor
from airflow_paimon.sensors.tags import TagSensor, TagTimeSensor

__all__ = ["ChangesSensor", "TagSensor", "TagTimeSensor"]
