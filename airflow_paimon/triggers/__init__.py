"""Triggers of the Paimon provider (deferrable waits for periodic tags and changes; asset watchers)."""

from __future__ import annotations

from airflow_paimon.triggers.changes import ChangesTrigger
from airflow_paimon.triggers.tags import TagExistsTrigger, TagTimeTrigger

__all__ = ["ChangesTrigger", "TagExistsTrigger", "TagTimeTrigger"]
