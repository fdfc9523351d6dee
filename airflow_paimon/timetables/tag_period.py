"""A timetable with one run per periodic-tag period, started when the period's tag is due.

``TagPeriodTimetable(create_time="02:30", interval="1d", timezone="Europe/Berlin")`` schedules the run of
the period ``[2026-11-11 00:00, 2026-11-12 00:00)`` (Berlin time) at 2026-11-12 02:30 Berlin time, with that
period as its data interval, so ``logical_date`` is the period's first day and a tag operator can name and
place the tag from the run alone. The calendar is ``airflow_paimon.format.periods`` (periods aligned to the
Unix epoch in local calendar days), the same one the tag operators use.

Register it through the provider's plugin (``airflow_paimon.plugins.AirflowPaimonPlugin``), which Airflow
loads from the provider's metadata; the scheduler and API server need it to deserialize DAGs.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from airflow.timetables.base import DagRunInfo, DataInterval, Timetable

from airflow_paimon.arguments import timezone as check_timezone
from airflow_paimon.format import periodic_tags
from airflow_paimon.format.period_values import parse_create_time, parse_duration, parse_timezone
from airflow_paimon.format.periods import Period, PeriodSpec

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow.timetables.base import TimeRestriction
    from pendulum import DateTime

__all__ = ["TagPeriodTimetable"]

_ONE_DAY = _dt.timedelta(days=1)


def _interval_days(interval: str | int | _dt.timedelta) -> int:
    if isinstance(interval, bool):
        raise ValueError(f"interval must be a whole number of days such as '1d', not {interval!r}")
    if isinstance(interval, int):
        days = interval
    else:
        if isinstance(interval, str):
            try:
                value = parse_duration(interval)
            except ValueError as exc:
                raise ValueError(f"invalid interval {interval!r}: {exc}") from None
        elif isinstance(interval, _dt.timedelta):
            value = interval
        else:
            raise ValueError(f"interval must be a duration such as '1d' or '2 d', not {interval!r}")
        if value % _ONE_DAY:
            raise ValueError(f"invalid interval {interval!r}: it must be a whole number of days, e.g. '1d' or '48h'")
        days = value // _ONE_DAY
    if days < 1:
        raise ValueError(f"invalid interval {interval!r}: it must be at least one day")
    return days


class TagPeriodTimetable(Timetable):
    """One DAG run per tag period, at the instant the period's tag is due.

    :param create_time: time of day (``'HH:mm'``) after the period's end at which its tag is due
        (``tag.create-time``).
    :param interval: period length in whole days, as a Paimon duration (``'1d'``, ``'2 d'``, ``'48h'``) or
        an ``int`` of days (``tag.create-interval``).
    :param timezone: the time zone of the calendar (``sink.process-time-zone``): an IANA name, ``'UTC'``
        or an offset such as ``'+08:00'``.

    Each run's data interval is its period ``[start, end)`` and its ``run_after`` the period's creation
    instant. A manual run covers the last whole period that ended at or before the moment it is triggered.
    With ``catchup=True`` every period from the first one starting at or after ``start_date`` is run; with
    ``catchup=False`` scheduling starts from the latest period whose tag is already due. A run is created
    only for periods starting at or before ``end_date``.
    """

    periodic = True
    can_be_scheduled = True

    def __init__(
        self,
        create_time: str | _dt.time = "00:00",
        interval: str | int | _dt.timedelta = "1d",
        timezone: str | _dt.tzinfo = "UTC",
    ) -> None:
        if isinstance(timezone, str):
            check_timezone(timezone, "timezone")
        self._spec = PeriodSpec(interval_days=_interval_days(interval), create_time=parse_create_time(create_time),
                                timezone=parse_timezone(timezone))
        self.description = self._describe()

    @classmethod
    def from_spec(cls, spec: PeriodSpec) -> TagPeriodTimetable:
        """The timetable of a :class:`PeriodSpec` (its retention settings play no part in scheduling)."""
        return cls(create_time=spec.create_time, interval=spec.interval_days, timezone=spec.timezone)

    @classmethod
    def from_table_options(cls, options: Mapping[str, str]) -> TagPeriodTimetable:
        """The timetable matching a table's tag options (``tag.create-time``, ``tag.create-interval``,
        ``sink.process-time-zone`` or Paimon's ``tag.automatic-creation`` options)."""
        return cls.from_spec(PeriodSpec.from_options(options))

    # -- properties -----------------------------------------------------------------------------------

    @property
    def spec(self) -> PeriodSpec:
        return self._spec

    @property
    def interval_text(self) -> str:
        return f"{self._spec.interval_days}d"

    @property
    def summary(self) -> str:
        return f"tag every {self.interval_text} at {self._spec.create_time_text} {self._spec.timezone_name}"

    def _describe(self) -> str:
        spec = self._spec
        if spec.interval_days == 1:
            every = "Every day"
            covers = "the previous day"
        else:
            every = f"Every {spec.interval_days} days (aligned to 1970-01-01)"
            covers = f"the {spec.interval_days} days before"
        return f"{every} at {spec.create_time_text} {spec.timezone_name}, for {covers}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(create_time={self._spec.create_time_text!r}, "
            f"interval={self.interval_text!r}, timezone={self._spec.timezone_name!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TagPeriodTimetable):
            return NotImplemented
        return self.serialize() == other.serialize()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.serialize().items())))

    # -- serialization --------------------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        return {
            "create_time": self._spec.create_time_text,
            "interval": self.interval_text,
            "timezone": self._spec.timezone_name,
        }

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> TagPeriodTimetable:
        return cls(
            create_time=data.get("create_time", "00:00"),
            interval=data.get("interval", "1d"),
            timezone=parse_timezone(data.get("timezone", "UTC")),  # as stored, even a name refused today
        )

    # -- scheduling -----------------------------------------------------------------------------------

    def _info(self, period: Period) -> DagRunInfo:
        return DagRunInfo(
            run_after=self._spec.creation_instant(period).in_timezone("UTC"),
            data_interval=DataInterval(period.start.in_timezone("UTC"), period.end.in_timezone("UTC")),
        )

    def period_of(self, data_interval: DataInterval) -> Period:
        """The period of a run's data interval (``PeriodMismatchError`` when it is not one of this calendar)."""
        return periodic_tags.period_of_run(self._spec, data_interval.start, data_interval.end)

    def _first_period_starting_at_or_after(self, instant: _dt.datetime) -> Period:
        period = self._spec.period_containing(instant)
        if period.start < instant:
            period = self._spec.next(period)
        return period

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        period = periodic_tags.period_of_run(self._spec, run_after=run_after)
        return DataInterval(period.start.in_timezone("UTC"), period.end.in_timezone("UTC"))

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        spec = self._spec
        candidates: list[Period] = []
        if last_automated_data_interval is not None:
            # The first period that starts at or after the previous run's data ends (this also realigns
            # after a change of interval), and always after the previous run's start.
            following = self._first_period_starting_at_or_after(last_automated_data_interval.end)
            if following.start <= last_automated_data_interval.start:
                following = spec.next(following)
            candidates.append(following)
        if restriction.earliest is not None:
            candidates.append(self._first_period_starting_at_or_after(restriction.earliest))
        if not restriction.catchup or not candidates:
            # Without catchup (or with nothing to start from) begin with the newest period already due.
            candidates.append(periodic_tags.latest_due_period(spec))
        period = max(candidates, key=lambda p: p.start)
        if restriction.latest is not None and period.start > restriction.latest:
            return None
        return self._info(period)
