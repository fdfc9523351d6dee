"""A task's Airflow run as the periodic-tag use case (``airflow_paimon.format.periodic_tags``) sees it.

The operators and sensors of periodic tags read the run's instants from the task's context here, and a run whose
data interval is not one period of the table's calendar (the DAG's timetable disagrees with the table's tag
options) fails at once, without retries, naming both calendars and the timetable that would match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_paimon.format import periodic_tags
from airflow_paimon.format.errors import PeriodMismatchError
from airflow_paimon.format.periods import PeriodSpec

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_paimon.format import Table

__all__ = ["plan_run", "run_times"]


def run_times(context: Mapping[str, Any]) -> periodic_tags.RunTimes:
    """The instants of the task's run that decide its period."""
    dag_run = context.get("dag_run")
    return periodic_tags.RunTimes(
        data_interval_start=context.get("data_interval_start"),
        data_interval_end=context.get("data_interval_end"),
        logical_date=context.get("logical_date"),
        run_after=getattr(dag_run, "run_after", None),
    )


def _mismatch_failure(exc: PeriodMismatchError, spec: PeriodSpec, context: Mapping[str, Any]) -> AirflowFailException:
    timetable = getattr(context.get("dag"), "timetable", None)
    schedule = "the DAG's schedule"
    if timetable is not None:
        schedule += f" {timetable!r} ({getattr(timetable, 'description', None) or type(timetable).__name__})"
    return AirflowFailException(
        f"{exc}. The run comes from {schedule}: schedule the DAG with "
        f"TagPeriodTimetable(create_time={spec.create_time_text!r}, interval='{spec.interval_days}d', "
        f"timezone={spec.timezone_name!r}), which matches the table's options"
    )


def plan_run(table: Table, context: Mapping[str, Any]) -> periodic_tags.TagPlan:
    """The plan of the run's periodic tag of ``table`` at the clock's now; a mismatching data interval fails the
    task at once. Other library errors propagate (callers turn them into task failures)."""
    try:
        return periodic_tags.plan(table, run_times(context))
    except PeriodMismatchError as exc:
        raise _mismatch_failure(exc, PeriodSpec.from_options(table.options()), context) from exc
