"""The values of periodic-tag options: Paimon durations, times of day, period formatters and time zones.

Each parser reads one option value as Paimon writes it and raises ``ValueError`` naming the value and the rule it
breaks; :class:`~airflow_paimon.format.periods.PeriodSpec` and the Airflow surface's argument checks share them.
Pure Python on pendulum and the standard library.
"""

from __future__ import annotations

import datetime as _dt
import re

import pendulum
from pendulum.tz.timezone import FixedTimezone, Timezone

from .values import format_duration, parse_duration

__all__ = [
    "FORMATTER_WITHOUT_DASHES",
    "FORMATTER_WITH_DASHES",
    "format_create_time",
    "format_duration",
    "parse_create_time",
    "parse_delay",
    "parse_duration",
    "parse_formatter",
    "parse_interval_days",
    "parse_num_retained",
    "parse_positive_duration",
    "parse_timezone",
    "timezone_name",
]

FORMATTER_WITH_DASHES = "yyyy-MM-dd"
FORMATTER_WITHOUT_DASHES = "yyyyMMdd"

_ONE_DAY = _dt.timedelta(days=1)
_UTC = pendulum.UTC

# ---------------------------------------------------------------------------------------------------------
# Durations (Paimon's TimeUtils.parseDuration syntax)
# ---------------------------------------------------------------------------------------------------------

# Paimon's duration syntax has one reader: values.parse_duration (re-exported here with its writer).


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


def format_create_time(value: _dt.time) -> str:
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


def parse_interval_days(text: str) -> int:
    """``tag.create-interval`` in days: periods are whole local days, so a shorter or fractional one has no grid."""
    value = parse_duration(text)
    if value < _ONE_DAY:
        raise ValueError("the interval must be at least one day, e.g. '1d' or '2 d'")
    if value % _ONE_DAY:
        raise ValueError("the interval must be a whole number of days, e.g. '1d', '2 d' or '48h'")
    return value // _ONE_DAY


def parse_delay(text: str) -> _dt.timedelta:
    """``tag.creation-delay`` of Paimon's daily auto tags: a delay of a day or more would push a tag past the next."""
    value = parse_duration(text)
    if value >= _ONE_DAY:
        raise ValueError("the delay of daily tags must be shorter than one day")
    return value


def parse_positive_duration(text: str) -> _dt.timedelta:
    """A retention such as ``tag.default-time-retained``: zero or less would expire a tag as it is made."""
    value = parse_duration(text)
    if value <= _dt.timedelta(0):
        raise ValueError("the duration must be positive")
    return value


def parse_num_retained(text: str) -> int:
    """``tag.num-retained-max``: at least one tag, or retention would delete the tag just created."""
    stripped = text.strip()
    if not re.fullmatch(r"[+-]?\d+", stripped):
        raise ValueError("expected a whole number")
    value = int(stripped)
    if value < 1:
        raise ValueError("at least 1 tag must be retained")
    return value
