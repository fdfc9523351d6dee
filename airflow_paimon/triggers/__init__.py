"""Triggers of the Paimon provider (deferrable waits for periodic tags)."""

from __future__ import annotations

from airflow_paimon.triggers.tags import TagExistsTrigger, TagTimeTrigger

__all__ = ["TagExistsTrigger", "TagTimeTrigger"]
