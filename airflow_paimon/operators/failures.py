"""Library errors as Airflow task failures.

An error of the format library (a bad option, an expired snapshot, a tag on another snapshot) says what is wrong
with the table or the arguments; retrying the task cannot fix it, so the task fails at once, with the library's
message.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException

__all__ = ["task_failure"]


def task_failure(exc: Exception) -> AirflowFailException:
    """A library error that no retry can fix: fail the task at once with the library's message."""
    return AirflowFailException(f"{type(exc).__name__}: {exc}")
