"""The calendar of periodic tags: which period a run covers, what its tag is called and when it is due.

A table's periodic tags follow these rules (see "Periodic tags" in ARCHITECTURE.md):

* Periods are ``interval_days`` local calendar days long and aligned to the Unix epoch (1970-01-01) in the
  spec's time zone: the period of a local day ``d`` has index ``(d - 1970-01-01).days // interval_days``.
  Periods follow local calendar days, so in a time zone with daylight saving time a day may last 23 or 25
  hours.
* A period's tag is named by its first day, formatted with ``tag.period-formatter`` (``yyyy-MM-dd`` by
  default, ``yyyyMMdd`` for ``without_dashes``).
* A period's tag is due at its *creation instant*: the first instant at which the local wall clock reads
  ``<day after the period> + tag.create-time``. Wall-clock times that do not exist (the hour skipped when
  daylight saving time starts) resolve to the moment the clock jumps; repeated ones (when it ends) to their
  first occurrence.

Tables that Paimon already tags automatically (``tag.automatic-creation`` = ``process-time`` or
``watermark`` with the ``daily`` ``tag.creation-period``) map onto the same calendar: one-day periods whose
tags are due at midnight + ``tag.creation-delay``, named exactly as Paimon names them. Which snapshot such a
tag goes on is Paimon's rule, not the one above (``auto_tags.py``, ``period_tags.py``).

The option values are read by ``period_values.py`` and the table's options by ``period_options.py``; the use case
built on this calendar (plan a run's tag, apply it) is ``periodic_tags.py``. Pure Python on pendulum and the
standard library: no Airflow, no Spark.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pendulum
from pendulum import DateTime
from pendulum.tz.timezone import FixedTimezone, Timezone

from .errors import PeriodMismatchError
from .period_options import spec_fields_from_options
from .period_values import (
    FORMATTER_WITH_DASHES,
    FORMATTER_WITHOUT_DASHES,
    format_create_time,
    parse_create_time,
    parse_duration,
    parse_formatter,
    parse_interval_days,
    parse_timezone,
    timezone_name,
)

__all__ = ["EPOCH", "Period", "PeriodMismatchError", "PeriodSpec"]

EPOCH = _dt.date(1970, 1, 1)
"""Day 0 of the period grid (in the spec's time zone)."""

_UTC = pendulum.UTC

# ---------------------------------------------------------------------------------------------------------
# Wall clock <-> instants
# ---------------------------------------------------------------------------------------------------------

_UTC_STD = _dt.timezone.utc


def _local_wall(instant: _dt.datetime, tz: _dt.tzinfo) -> _dt.datetime:
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def _first_instant_at_wall(wall: _dt.datetime, tz: Timezone | FixedTimezone) -> DateTime:
    """The first instant at which the wall clock in ``tz`` reads ``wall`` or later.

    For a wall time that exists this is the instant itself (the earlier one if it occurs twice); for a wall
    time skipped by a forward transition it is the transition itself."""
    early = wall.replace(tzinfo=tz, fold=0).astimezone(_UTC_STD)
    if _local_wall(early, tz) == wall:
        instant = early  # fold=0 is the earlier of two occurrences
    else:
        # A gap: with fold=0 the pre-transition offset lands after the jump, with fold=1 the post-transition
        # offset lands before it. Find the jump (microsecond precision) between the two.
        lo = wall.replace(tzinfo=tz, fold=1).astimezone(_UTC_STD)
        hi = early
        if lo > hi:
            lo, hi = hi, lo
        step = _dt.timedelta(microseconds=1)
        while hi - lo > step:
            mid = lo + (hi - lo) / 2
            if _local_wall(mid, tz) >= wall:
                hi = mid
            else:
                lo = mid
        instant = hi
    return pendulum.instance(instant).in_timezone(tz)


def _as_instant(value: _dt.datetime, what: str) -> _dt.datetime:
    """``value`` in UTC. Comparing in UTC keeps repeated wall-clock times (fold) in order: Python compares
    two datetimes of the same time zone by their wall clocks alone."""
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got the naive datetime {value.isoformat()}")
    return value.astimezone(_UTC_STD)


# ---------------------------------------------------------------------------------------------------------
# Periods
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    """One period: the instants ``[start, end)``, both aware pendulum DateTimes in the spec's time zone."""

    start: DateTime
    end: DateTime

    @property
    def first_day(self) -> _dt.date:
        """The local calendar day the period starts on (its tag is named after it)."""
        return self.start.date()

    def __contains__(self, instant: object) -> bool:
        if not isinstance(instant, _dt.datetime) or instant.tzinfo is None:
            return False
        instant = instant.astimezone(_UTC_STD)
        return self.start <= instant < self.end

    def __str__(self) -> str:
        return f"[{self.start.isoformat()}, {self.end.isoformat()})"


_TAG_NAME_RE = {
    FORMATTER_WITH_DASHES: re.compile(r"(\d{4})-(\d{2})-(\d{2})"),
    FORMATTER_WITHOUT_DASHES: re.compile(r"(\d{4})(\d{2})(\d{2})"),
}

_SPEC_FIELDS = (
    "interval_days",
    "create_time",
    "timezone",
    "formatter",
    "num_retained_max",
    "default_time_retained",
)


@dataclass(frozen=True)
class PeriodSpec:
    """How a table's periodic tags are laid out in time, and how many of them are kept.

    Construct it directly (values are checked and normalised: ``create_time`` may be ``'HH:mm'``,
    ``timezone`` a name, ``formatter`` a ``tag.period-formatter`` value, ``default_time_retained`` a Paimon
    duration) or from table options with :meth:`from_options`.
    """

    interval_days: int = 1
    create_time: _dt.time = _dt.time(0, 0)
    timezone: Timezone | FixedTimezone = field(default=_UTC)
    formatter: str = FORMATTER_WITH_DASHES
    num_retained_max: int | None = None
    default_time_retained: _dt.timedelta | None = None

    def __post_init__(self) -> None:
        if isinstance(self.interval_days, bool) or not isinstance(self.interval_days, int):
            raise ValueError(f"interval_days must be a whole number of days, not {self.interval_days!r}")
        if self.interval_days < 1:
            raise ValueError(f"interval_days must be at least 1, not {self.interval_days}")
        object.__setattr__(self, "create_time", parse_create_time(self.create_time))
        object.__setattr__(self, "timezone", parse_timezone(self.timezone))
        object.__setattr__(self, "formatter", parse_formatter(self.formatter))
        if self.num_retained_max is not None:
            if isinstance(self.num_retained_max, bool) or not isinstance(self.num_retained_max, int):
                raise ValueError(f"num_retained_max must be a whole number, not {self.num_retained_max!r}")
            if self.num_retained_max < 1:
                raise ValueError(f"num_retained_max must be at least 1, not {self.num_retained_max}")
        retained = self.default_time_retained
        if retained is not None:
            if isinstance(retained, str):
                retained = parse_duration(retained)
                object.__setattr__(self, "default_time_retained", retained)
            if not isinstance(retained, _dt.timedelta):
                raise ValueError(f"default_time_retained must be a timedelta, not {retained!r}")
            if retained <= _dt.timedelta(0):
                raise ValueError(f"default_time_retained must be positive, not {retained}")

    # -- construction from table options ------------------------------------------------------------------

    @classmethod
    def from_options(cls, options: Mapping[str, str], **overrides: Any) -> PeriodSpec:
        """Read the periodic-tag options of a table.

        Options read: ``tag.create-time`` ('HH:mm', default '00:00'), ``tag.create-interval`` (whole days,
        default ``1d``), ``tag.period-formatter``, ``tag.num-retained-max``, ``tag.default-time-retained``
        and ``sink.process-time-zone`` (UTC when unset). When Paimon itself creates the tags
        (``tag.automatic-creation`` = ``process-time`` or ``watermark``), its ``tag.creation-period``
        (only ``daily`` is supported) and ``tag.creation-delay`` are used instead, so the names and times are
        Paimon's: one-day periods due at midnight + delay; with ``watermark`` the time zone is
        ``sink.watermark-time-zone`` (default UTC), as in Paimon.

        ``overrides`` replace single fields after the options are read (``interval_days``, ``create_time``,
        ``timezone``, ``formatter``, ``num_retained_max``, ``default_time_retained``); an override of
        ``None`` is ignored. Every invalid value raises ``ValueError`` naming the option and the value.
        """
        unknown = sorted(set(overrides) - set(_SPEC_FIELDS))
        if unknown:
            raise TypeError(f"unknown PeriodSpec field(s): {', '.join(unknown)}; known: {', '.join(_SPEC_FIELDS)}")
        values = spec_fields_from_options(options)
        for name, value in overrides.items():
            if value is None:
                continue
            if name == "interval_days" and isinstance(value, str):
                try:
                    value = parse_interval_days(value)
                except ValueError as exc:
                    raise ValueError(f"invalid interval_days {value!r}: {exc}") from None
            values[name] = value
        return cls(**values)

    # -- the grid -------------------------------------------------------------------------------------

    def _index_of_day(self, day: _dt.date) -> int:
        return (day - EPOCH).days // self.interval_days

    def _first_day(self, index: int) -> _dt.date:
        return EPOCH + _dt.timedelta(days=index * self.interval_days)

    def _day_start(self, day: _dt.date) -> DateTime:
        return _first_instant_at_wall(_dt.datetime.combine(day, _dt.time(0, 0)), self.timezone)

    def _period(self, index: int) -> Period:
        return Period(self._day_start(self._first_day(index)), self._day_start(self._first_day(index + 1)))

    def _index(self, period: Period) -> int:
        if not isinstance(period, Period):
            raise TypeError(f"expected a Period, not {type(period).__name__}")
        return self._index_of_day(_local_wall(period.start, self.timezone).date())

    def local_date(self, instant: _dt.datetime) -> _dt.date:
        """The calendar day of ``instant`` in the spec's time zone."""
        return _local_wall(_as_instant(instant, "instant"), self.timezone).date()

    def period_for_day(self, day: _dt.date) -> Period:
        """The period containing the local calendar day ``day``."""
        if isinstance(day, _dt.datetime) or not isinstance(day, _dt.date):
            raise TypeError(f"expected a date, not {type(day).__name__}")
        return self._period(self._index_of_day(day))

    def period_containing(self, instant: _dt.datetime) -> Period:
        """The period whose ``[start, end)`` contains ``instant`` (any aware datetime)."""
        instant = _as_instant(instant, "instant")
        index = self._index_of_day(_local_wall(instant, self.timezone).date())
        period = self._period(index)
        # Wall clocks that repeat across midnight can put an instant's local day one period off.
        while instant >= period.end:
            index += 1
            period = self._period(index)
        while instant < period.start:
            index -= 1
            period = self._period(index)
        return period

    def last_period_ending_at_or_before(self, instant: _dt.datetime) -> Period:
        """The latest whole period with ``end <= instant``."""
        return self.previous(self.period_containing(instant))

    def period_for_interval(self, start: _dt.datetime | None, end: _dt.datetime | None) -> Period:
        """The period an Airflow run is about.

        A non-empty data interval ``[start, end)`` must be one period of this calendar exactly, and is about
        that period; any other interval raises :class:`PeriodMismatchError` (a schedule whose periods differ
        from the table's would otherwise tag the wrong period, or the same one twice, and never the others).
        An empty or missing interval (a trigger-style schedule such as ``@daily`` in Airflow 3, where
        ``start == end == logical date``) is about the last whole period ending at or before ``end`` (or
        ``start`` when only it is given): the period that just ended.
        """
        if start is not None and end is not None:
            start = _as_instant(start, "the data interval start")
            end = _as_instant(end, "the data interval end")
            if end < start:
                raise ValueError(f"the data interval ends ({end.isoformat()}) before it starts ({start.isoformat()})")
            if start < end:
                period = self.period_containing(start)
                if period.start != start or period.end != end:
                    local = self.timezone
                    raise PeriodMismatchError(
                        f"the data interval [{pendulum.instance(start).in_timezone(local).isoformat()}, "
                        f"{pendulum.instance(end).in_timezone(local).isoformat()}) is not one period of the "
                        f"table's calendar ({self.describe()}); its start lies in the period {period}, "
                        f"tag {self.tag_name(period)!r}"
                    )
                return period
            return self.last_period_ending_at_or_before(end)
        reference = end if end is not None else start
        if reference is None:
            raise ValueError("a data interval start, end or logical date is needed to find the period")
        return self.last_period_ending_at_or_before(reference)

    def previous(self, period: Period) -> Period:
        """The period right before ``period``."""
        return self._period(self._index(period) - 1)

    def next(self, period: Period) -> Period:
        """The period right after ``period``."""
        return self._period(self._index(period) + 1)

    def creation_instant(self, period: Period) -> DateTime:
        """When the tag of ``period`` is due: the first instant whose local wall clock reads the day after
        the period at ``create_time`` or later."""
        next_day = self._first_day(self._index(period) + 1)
        return _first_instant_at_wall(_dt.datetime.combine(next_day, self.create_time), self.timezone)

    def last_period_created_at_or_before(self, instant: _dt.datetime) -> Period:
        """The latest period whose creation instant is at or before ``instant`` (the newest tag that is due)."""
        instant = _as_instant(instant, "instant")
        period = self.last_period_ending_at_or_before(instant)
        while self.creation_instant(period) > instant:
            period = self.previous(period)
        return period

    # -- names ----------------------------------------------------------------------------------------

    def tag_name(self, period: Period) -> str:
        """The tag name of ``period``: its first day written with ``formatter``."""
        day = self._first_day(self._index(period))
        if self.formatter == FORMATTER_WITH_DASHES:
            return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"
        return f"{day.year:04d}{day.month:02d}{day.day:02d}"

    def parse_tag_name(self, name: str) -> Period | None:
        """The period whose tag is called ``name``, or ``None`` when ``name`` is not a periodic tag of this
        spec (another format, not a real date, or a day that does not start a period). Retention by count
        uses this, so it only ever touches periodic tags."""
        if not isinstance(name, str):
            return None
        match = _TAG_NAME_RE[self.formatter].fullmatch(name)
        if not match:
            return None
        try:
            day = _dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            return None
        if (day - EPOCH).days % self.interval_days:
            return None
        return self.period_for_day(day)

    def is_periodic_tag(self, name: str) -> bool:
        return self.parse_tag_name(name) is not None

    # -- presentation ---------------------------------------------------------------------------------

    @property
    def create_time_text(self) -> str:
        """``create_time`` written ``HH:mm`` (with seconds only when it has them)."""
        return format_create_time(self.create_time)

    @property
    def timezone_name(self) -> str:
        return timezone_name(self.timezone)

    def describe(self) -> str:
        every = "day" if self.interval_days == 1 else f"{self.interval_days} days"
        return (
            f"one tag every {every} (periods aligned to 1970-01-01), due at {self.create_time_text} "
            f"{self.timezone_name} after the period ends, named {self.formatter}"
        )
