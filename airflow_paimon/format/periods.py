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

Pure Python on pendulum and the standard library: no Airflow, no Spark.
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

from .errors import InvalidOptionError, PeriodMismatchError
from .values import format_duration, parse_duration

__all__ = [
    "EPOCH",
    "FORMATTER_WITH_DASHES",
    "FORMATTER_WITHOUT_DASHES",
    "OPT_AUTOMATIC_CREATION",
    "OPT_CREATE_INTERVAL",
    "OPT_CREATE_TIME",
    "OPT_CREATION_DELAY",
    "OPT_CREATION_PERIOD",
    "OPT_CREATION_PERIOD_DURATION",
    "OPT_DEFAULT_TIME_RETAINED",
    "OPT_NUM_RETAINED_MAX",
    "OPT_PERIOD_FORMATTER",
    "OPT_PROCESS_TIME_ZONE",
    "OPT_WATERMARK_TIME_ZONE",
    "Period",
    "PeriodMismatchError",
    "PeriodSpec",
    "format_duration",
    "parse_create_time",
    "parse_duration",
    "parse_formatter",
    "parse_timezone",
    "timezone_name",
]

EPOCH = _dt.date(1970, 1, 1)
"""Day 0 of the period grid (in the spec's time zone)."""

FORMATTER_WITH_DASHES = "yyyy-MM-dd"
FORMATTER_WITHOUT_DASHES = "yyyyMMdd"

# Table options read by PeriodSpec.from_options.
OPT_CREATE_TIME = "tag.create-time"
OPT_CREATE_INTERVAL = "tag.create-interval"
OPT_PERIOD_FORMATTER = "tag.period-formatter"
OPT_NUM_RETAINED_MAX = "tag.num-retained-max"
OPT_DEFAULT_TIME_RETAINED = "tag.default-time-retained"
OPT_PROCESS_TIME_ZONE = "sink.process-time-zone"
OPT_WATERMARK_TIME_ZONE = "sink.watermark-time-zone"
OPT_AUTOMATIC_CREATION = "tag.automatic-creation"
OPT_CREATION_PERIOD = "tag.creation-period"
OPT_CREATION_DELAY = "tag.creation-delay"
OPT_CREATION_PERIOD_DURATION = "tag.creation-period-duration"

_ONE_DAY = _dt.timedelta(days=1)
_UTC = pendulum.UTC

# ---------------------------------------------------------------------------------------------------------
# Other option values
# ---------------------------------------------------------------------------------------------------------

_CREATE_TIME_RE = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?")


def parse_create_time(text: str | _dt.time) -> _dt.time:
    """Parse a time of day written ``HH:mm`` (``HH:mm:ss`` and ``HH:mm:ss.ffffff`` are accepted too)."""
    if isinstance(text, _dt.time):
        if text.tzinfo is not None:
            raise ValueError(f"the time of day {text!r} must not carry a time zone")
        return text
    if not isinstance(text, str):
        raise ValueError(f"a time of day must be written 'HH:mm', not {text!r}")
    match = _CREATE_TIME_RE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a time of day: expected 'HH:mm', e.g. '00:00' or '02:30'")
    hour, minute = int(match.group(1)), int(match.group(2))
    second = int(match.group(3) or 0)
    micro = int((match.group(4) or "0").ljust(6, "0"))
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"{text!r} is not a time of day: hours go from 00 to 23 and minutes from 00 to 59")
    return _dt.time(hour, minute, second, micro)


def _format_create_time(value: _dt.time) -> str:
    if value.microsecond:
        return value.isoformat(timespec="microseconds")
    if value.second:
        return value.isoformat(timespec="seconds")
    return value.isoformat(timespec="minutes")


_FORMATTERS = {
    "with_dashes": FORMATTER_WITH_DASHES,
    "without_dashes": FORMATTER_WITHOUT_DASHES,
    # Paimon's daily handler writes the same names for this one as for without_dashes.
    "without_dashes_and_spaces": FORMATTER_WITHOUT_DASHES,
}


def parse_formatter(text: str) -> str:
    """Map a ``tag.period-formatter`` value (or an explicit pattern) to ``yyyy-MM-dd`` or ``yyyyMMdd``."""
    if not isinstance(text, str):
        raise ValueError(f"a period formatter must be a string, not {text!r}")
    value = text.strip()
    if value in (FORMATTER_WITH_DASHES, FORMATTER_WITHOUT_DASHES):
        return value
    pattern = _FORMATTERS.get(value.lower())
    if pattern is None:
        raise ValueError(
            f"{text!r} is not a period formatter: use with_dashes (yyyy-MM-dd), without_dashes (yyyyMMdd), "
            f"without_dashes_and_spaces, or the pattern yyyy-MM-dd or yyyyMMdd"
        )
    return pattern


# Java's custom zone ids: Z, +h, +hh, +hh:mm, +hhmm, +hh:mm:ss, optionally after UTC, GMT or UT.
_OFFSET_ZONE_RE = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?", re.IGNORECASE)


def parse_timezone(value: str | _dt.tzinfo | None) -> Timezone | FixedTimezone:
    """A pendulum time zone from an IANA name (``Europe/Berlin``), ``UTC``, or a fixed offset written as
    Java's ``ZoneId.of`` accepts it (``+08:00``, ``GMT-08:00``, ``UTC+8``). ``None`` or ``""`` means UTC."""
    if value is None:
        return _UTC
    if isinstance(value, (Timezone, FixedTimezone)):
        return value
    if isinstance(value, _dt.tzinfo):
        key = getattr(value, "key", None) or getattr(value, "zone", None)
        if isinstance(key, str):
            return parse_timezone(key)
        offset = value.utcoffset(None)
        if offset is not None:
            return pendulum.FixedTimezone(int(offset.total_seconds()))
        raise ValueError(f"cannot use the time zone {value!r}: give an IANA name such as 'Europe/Berlin'")
    if not isinstance(value, str):
        raise ValueError(f"a time zone must be a name such as 'Europe/Berlin', not {value!r}")
    name = value.strip()
    if not name or name.upper() in ("Z", "UTC", "UT", "GMT"):
        return _UTC
    match = _OFFSET_ZONE_RE.fullmatch(name)
    if match:
        sign = -1 if match.group(1) == "-" else 1
        hours, minutes, seconds = (int(match.group(i) or 0) for i in (2, 3, 4))
        total = hours * 3600 + minutes * 60 + seconds
        if minutes > 59 or seconds > 59 or total > 18 * 3600:
            raise ValueError(f"{value!r} is not a time zone: offsets go up to +/-18:00")
        return _UTC if total == 0 else pendulum.FixedTimezone(sign * total)
    try:
        return pendulum.timezone(name)
    except Exception:  # pendulum raises InvalidTimezone (or a zoneinfo error) for unknown names
        raise ValueError(
            f"{value!r} is not a time zone: use an IANA name such as 'Europe/Berlin' or an offset such as '+08:00'"
        ) from None


def timezone_name(tz: _dt.tzinfo) -> str:
    """The name ``parse_timezone`` reads back: ``Europe/Berlin``, ``UTC`` or ``+08:00``."""
    if isinstance(tz, FixedTimezone) and tz.offset % 60:
        # pendulum names a fixed offset to the minute; keep its seconds so the name reads back exactly.
        sign = "-" if tz.offset < 0 else "+"
        total = abs(tz.offset)
        return f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"
    name = getattr(tz, "name", None) or getattr(tz, "key", None)
    if isinstance(name, str) and name:
        return name
    return str(tz)


# ---------------------------------------------------------------------------------------------------------
# Wall clock <-> instants
# ---------------------------------------------------------------------------------------------------------

_UTC_STD = _dt.timezone.utc


def _local_wall(instant: _dt.datetime, tz: _dt.tzinfo) -> _dt.datetime:
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def _first_instant_at_wall(wall: _dt.datetime, tz: _dt.tzinfo) -> DateTime:
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
        opts = {str(k): v for k, v in options.items()}

        def get(key: str) -> str | None:
            value = opts.get(key)
            if value is None:
                return None
            return str(value)

        def read(key: str, parse, default: str | None = None):
            raw = get(key)
            if raw is None:
                if default is None:
                    return None
                raw = default
            try:
                return parse(raw)
            except ValueError as exc:
                raise InvalidOptionError(f"invalid value for table option '{key}': {raw!r}: {exc}") from None

        mode_raw = get(OPT_AUTOMATIC_CREATION)
        mode = (mode_raw or "none").strip().lower()
        if mode not in ("none", "process-time", "watermark", "batch"):
            raise InvalidOptionError(
                f"invalid value for table option '{OPT_AUTOMATIC_CREATION}': {mode_raw!r}: expected one of "
                f"none, process-time, watermark, batch"
            )

        interval_days = read(OPT_CREATE_INTERVAL, _parse_interval_days)
        create_time = read(OPT_CREATE_TIME, parse_create_time)

        if mode in ("process-time", "watermark"):
            # Paimon creates these tags itself: follow its calendar so the names are the same.
            if get(OPT_CREATION_PERIOD_DURATION) is not None:
                raise InvalidOptionError(
                    f"invalid value for table option '{OPT_CREATION_PERIOD_DURATION}': "
                    f"{get(OPT_CREATION_PERIOD_DURATION)!r}: only daily periods are supported "
                    f"(Paimon names tags of a custom period duration 'yyyyMMddHHmm'); remove the option to use "
                    f"'{OPT_CREATION_PERIOD}' = 'daily'"
                )
            period_raw = get(OPT_CREATION_PERIOD)
            period = (period_raw or "daily").strip().lower()
            if period in ("hourly", "two-hours"):
                raise InvalidOptionError(
                    f"invalid value for table option '{OPT_CREATION_PERIOD}': {period_raw!r}: DAG runs of "
                    f"periodic tags support only daily periods (tag expiry handles every Paimon period)"
                )
            if period != "daily":
                raise InvalidOptionError(
                    f"invalid value for table option '{OPT_CREATION_PERIOD}': {period_raw!r}: expected one of "
                    f"daily, hourly, two-hours (and only daily is supported)"
                )
            delay = read(OPT_CREATION_DELAY, _parse_delay, default="0 ms")
            paimon_time = (_dt.datetime.combine(EPOCH, _dt.time(0, 0)) + delay).time()
            if interval_days is not None and interval_days != 1:
                raise InvalidOptionError(
                    f"invalid value for table option '{OPT_CREATE_INTERVAL}': {get(OPT_CREATE_INTERVAL)!r}: "
                    f"'{OPT_AUTOMATIC_CREATION}' = '{mode}' creates daily tags, so the interval must be 1d"
                )
            if create_time is not None and create_time != paimon_time:
                raise InvalidOptionError(
                    f"invalid value for table option '{OPT_CREATE_TIME}': {get(OPT_CREATE_TIME)!r}: "
                    f"'{OPT_AUTOMATIC_CREATION}' = '{mode}' creates tags at midnight + '{OPT_CREATION_DELAY}' "
                    f"({_format_create_time(paimon_time)}); remove one of the two"
                )
            interval_days, create_time = 1, paimon_time
            if mode == "watermark":
                timezone = read(OPT_WATERMARK_TIME_ZONE, parse_timezone, default="UTC")
            else:
                timezone = read(OPT_PROCESS_TIME_ZONE, parse_timezone)
        else:
            timezone = read(OPT_PROCESS_TIME_ZONE, parse_timezone)

        values: dict[str, Any] = {
            "interval_days": 1 if interval_days is None else interval_days,
            "create_time": _dt.time(0, 0) if create_time is None else create_time,
            "timezone": _UTC if timezone is None else timezone,
            "formatter": read(OPT_PERIOD_FORMATTER, parse_formatter, default="with_dashes"),
            "num_retained_max": read(OPT_NUM_RETAINED_MAX, _parse_num_retained),
            "default_time_retained": read(OPT_DEFAULT_TIME_RETAINED, _parse_positive_duration),
        }
        for name, value in overrides.items():
            if value is None:
                continue
            if name == "interval_days" and isinstance(value, str):
                try:
                    value = _parse_interval_days(value)
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
        return _format_create_time(self.create_time)

    @property
    def timezone_name(self) -> str:
        return timezone_name(self.timezone)

    def describe(self) -> str:
        every = "day" if self.interval_days == 1 else f"{self.interval_days} days"
        return (
            f"one tag every {every} (periods aligned to 1970-01-01), due at {self.create_time_text} "
            f"{self.timezone_name} after the period ends, named {self.formatter}"
        )


def _parse_interval_days(text: str) -> int:
    value = parse_duration(text)
    if value < _ONE_DAY:
        raise ValueError("the interval must be at least one day, e.g. '1d' or '2 d'")
    if value % _ONE_DAY:
        raise ValueError("the interval must be a whole number of days, e.g. '1d', '2 d' or '48h'")
    return value // _ONE_DAY


def _parse_delay(text: str) -> _dt.timedelta:
    value = parse_duration(text)
    if value >= _ONE_DAY:
        raise ValueError("the delay of daily tags must be shorter than one day")
    return value


def _parse_positive_duration(text: str) -> _dt.timedelta:
    value = parse_duration(text)
    if value <= _dt.timedelta(0):
        raise ValueError("the duration must be positive")
    return value


def _parse_num_retained(text: str) -> int:
    stripped = text.strip()
    if not re.fullmatch(r"[+-]?\d+", stripped):
        raise ValueError("expected a whole number")
    value = int(stripped)
    if value < 1:
        raise ValueError("at least 1 tag must be retained")
    return value
