"""The one clock of the Airflow surface: operators, sensors, triggers and the timetable ask it for "now".

One function in one module, called through the module (``clock.utcnow()``), so a test freezes every caller at
once by patching ``airflow_paimon.clock.utcnow``.
"""

from __future__ import annotations

import pendulum

__all__ = ["utcnow"]


def utcnow() -> pendulum.DateTime:
    """The current time in UTC."""
    return pendulum.now("UTC")
