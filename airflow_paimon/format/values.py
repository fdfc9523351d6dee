"""Values people give: points in time, durations, counts, booleans and tag names, read one way everywhere.

The library, the command line, the operators and the Spark applications all read what a user typed (or templated)
through these functions, so a value one of them accepts is accepted by all, and a bad one is refused with the
same :class:`~airflow_paimon.format.errors.InvalidValueError`, whose message names the argument (or table
option), the accepted forms and the value given.

Forms accepted:

- **Points in time** (:func:`instant`, :func:`epoch_millis`): an aware ``datetime`` (pendulum's too), a naive
  ``datetime`` or ``date`` (a date is its midnight), an ISO 8601 string (``2026-11-20``,
  ``2026-11-20 02:00:00``, ``2026-11-20T02:00:00+01:00``, ``...Z``) or epoch milliseconds (an ``int``).
  **A value without a zone is UTC** -- a naive ``datetime``, a date and an ISO string without an offset alike --
  as the command line and the library have always read strings; printed times are UTC too.
- **Durations** (:func:`duration`, :func:`parse_duration`): a ``timedelta`` (pendulum's ``Duration`` too) or
  Paimon's duration syntax, read as ``TimeUtils.parseDuration`` reads it: a whole number, optional spaces and
  a unit label, case-insensitive (``d``/``day``/``days``, ``h``/``hour(s)``, ``min``/``m``/``minute(s)``,
  ``s``/``sec(s)``/``second(s)``, ``ms``/``milli(s)``/``millisecond(s)``, ``µs``/``micro(s)``,
  ``ns``/``nano(s)``); no label means milliseconds. Nanoseconds are rounded to microseconds (a ``timedelta``
  holds no finer). Never negative.
- **Counts** (:func:`count`): an ``int``, a whole ``float`` (``3.0``, as JSON may carry it) or a string of
  digits, at or above a minimum. ``True``/``False`` are not counts.
- **Booleans**: table options are read as Paimon reads them (:func:`option_boolean`: ``true``/``false`` in any
  case, nothing else); arguments (:func:`boolean`) also take ``yes``/``no``, ``on``/``off`` and ``1``/``0``,
  which the Spark applications have always accepted.
- **Tag names** (:func:`tag_name`): not blank, at most 255 characters, not purely numeric (it would read as a
  snapshot id), and nothing that leaves the ``tag/`` directory: no ``/``, ``\\``, ``..`` or control characters
  (:func:`existing_tag_name` applies only the last rule, to look up tags other tools may have named).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from typing import Any

from .errors import InvalidValueError

__all__ = [
    "DURATION_FORMS",
    "INSTANT_FORMS",
    "MAX_TAG_NAME_LENGTH",
    "age_or_instant",
    "boolean",
    "count",
    "duration",
    "epoch_millis",
    "existing_tag_name",
    "format_duration",
    "instant",
    "is_safe_tag_name",
    "millis_before",
    "now_millis",
    "option_boolean",
    "parse_duration",
    "tag_name",
]

INSTANT_FORMS = ("ISO 8601 such as '2026-11-20', '2026-11-20 02:00:00' or "
                 "'2026-11-20T02:00:00+01:00' (no offset means UTC), a datetime or epoch milliseconds")
DURATION_FORMS = ("a duration such as '7d', '12 h' or '30 min' (a whole number and a unit: d, h, min, s, ms, µs "
                  "or ns, or their full names; no unit means ms) or a timedelta")
BOOLEAN_FORMS = "True or False (or 'true'/'false', 'yes'/'no', 'on'/'off', '1'/'0')"
MAX_TAG_NAME_LENGTH = 255

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MILLI = dt.timedelta(milliseconds=1)
_WHOLE = re.compile(r"\s*[+-]?\d+\s*")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DURATION = re.compile(r"(\d+)\s*(\S*)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# Paimon's unit labels (TimeUtils.TimeUnit); each plural label is also accepted with a trailing "s".
_UNIT_LABELS: dict[str, tuple[str, ...]] = {
    "days": ("d", "day", "days"),
    "hours": ("h", "hour", "hours"),
    "minutes": ("min", "m", "minute", "minutes"),
    "seconds": ("s", "sec", "secs", "second", "seconds"),
    "milliseconds": ("ms", "milli", "millis", "millisecond", "milliseconds"),
    "microseconds": ("µs", "us", "micro", "micros", "microsecond", "microseconds"),
    "nanoseconds": ("ns", "nano", "nanos", "nanosecond", "nanoseconds"),
}
_LABEL_TO_UNIT = {label: unit for unit, labels in _UNIT_LABELS.items() for label in labels}
_BOOLEAN_TEXT = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False,
                 "0": False}


def _not_an_instant(name: str, value: Any, why: str = "") -> InvalidValueError:
    detail = f" ({why})" if why else ""
    return InvalidValueError(f"{name}: {_shown(value)} is not a point in time{detail}; expected {INSTANT_FORMS}")


def _refuse(name: str, expected: str, value: Any, why: str = "") -> InvalidValueError:
    detail = f" ({why})" if why else ""
    return InvalidValueError(f"{name}: expected {expected}, not {_shown(value)}{detail}")


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, (str, int, float)) else f"{type(value).__name__} {value!r}"


# ---------------------------------------------------------------------------------------------------------
# Points in time
# ---------------------------------------------------------------------------------------------------------

def instant(value: Any, name: str = "time") -> dt.datetime:
    """The point in time ``value`` stands for, as an aware UTC ``datetime`` (see the module for the forms)."""
    if isinstance(value, bool):
        raise _not_an_instant(name, value)
    if isinstance(value, (int, float)):
        try:
            return _EPOCH + dt.timedelta(milliseconds=value)
        except (OverflowError, ValueError):
            raise _not_an_instant(name, value, "out of range") from None
    if isinstance(value, str):
        value = _parse_iso(value, name)
    if isinstance(value, dt.datetime):
        utc = value if value.tzinfo is None or value.utcoffset() is None else value.astimezone(dt.timezone.utc)
        # A plain datetime, also for pendulum's: its arithmetic returns pendulum types that stdlib code trips on.
        return dt.datetime(utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond,
                           tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time(), tzinfo=dt.timezone.utc)
    raise _not_an_instant(name, value)


def _parse_iso(text: str, name: str) -> dt.datetime:
    raw = text.strip()
    if raw[-1:] in ("Z", "z"):
        raw = raw[:-1] + "+00:00"
    try:
        if _ISO_DATE.fullmatch(raw):
            return dt.datetime.combine(dt.date.fromisoformat(raw), dt.time())
        return dt.datetime.fromisoformat(raw)
    except ValueError:
        raise _not_an_instant(name, text) from None


def epoch_millis(value: Any, name: str = "time") -> int:
    """Milliseconds since the Unix epoch of the point in time ``value`` (exact: no float rounding)."""
    return (instant(value, name) - _EPOCH) // _MILLI


def now_millis(now: Any = None) -> int:
    """``now`` (any point in time, for tests and reproducible runs) or the clock, in epoch milliseconds."""
    return int(time.time() * 1000) if now is None else epoch_millis(now, "now")


def age_or_instant(value: Any, name: str) -> dt.timedelta | dt.datetime:
    """A duration before now (``timedelta``, ``'7d'``) or a point in time (``datetime``, ISO 8601, epoch millis).

    Text that is not a point in time is read as a duration, so ``'7 dayz'`` is reported as a malformed duration
    rather than as a malformed time.
    """
    if isinstance(value, dt.timedelta):
        return duration(value, name)
    if isinstance(value, str):
        try:
            return instant(value, name)
        except InvalidValueError:
            pass
        try:
            return duration(value, name)
        except InvalidValueError as exc:
            raise InvalidValueError(f"{exc}; or a point in time: {INSTANT_FORMS}") from None
    try:
        return instant(value, name)
    except InvalidValueError:
        raise _refuse(name, f"{DURATION_FORMS}, or a point in time: {INSTANT_FORMS}", value) from None


def millis_before(value: Any, name: str, now_ms: int) -> int:
    """Epoch millis of ``value``: a point in time, or a duration (``age_or_instant``) counted back from ``now_ms``."""
    parsed = age_or_instant(value, name)
    if isinstance(parsed, dt.timedelta):
        return now_ms - parsed // _MILLI
    return (parsed - _EPOCH) // _MILLI


# ---------------------------------------------------------------------------------------------------------
# Durations
# ---------------------------------------------------------------------------------------------------------

def parse_duration(text: Any, name: str = "duration") -> dt.timedelta:
    """Paimon's duration syntax (``TimeUtils.parseDuration``): ``'1d'``, ``'12 h'``, ``'30min'``, ``'500'`` (ms)."""
    if not isinstance(text, str):
        raise _refuse(name, DURATION_FORMS, text)
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise _refuse(name, DURATION_FORMS, text)
    number, label = int(match.group(1)), match.group(2).lower()
    unit = _LABEL_TO_UNIT.get(label) if label else "milliseconds"
    if unit is None:
        raise _refuse(name, DURATION_FORMS, text, f"unknown unit {match.group(2)!r}")
    try:
        if unit == "nanoseconds":
            return dt.timedelta(microseconds=round(number / 1000))
        return dt.timedelta(**{unit: number})
    except OverflowError:
        raise _refuse(name, DURATION_FORMS, text, "too long") from None


def duration(value: Any, name: str, *, positive: bool = False) -> dt.timedelta:
    """A ``timedelta`` or a Paimon duration string, never negative (and above zero when ``positive``)."""
    if isinstance(value, dt.timedelta):
        parsed = dt.timedelta(days=value.days, seconds=value.seconds, microseconds=value.microseconds)
    elif isinstance(value, str):
        parsed = parse_duration(value, name)
    else:
        raise _refuse(name, DURATION_FORMS, value)
    if parsed < dt.timedelta(0):
        raise InvalidValueError(f"{name}: a duration must not be negative, got {value!r}")
    if positive and parsed == dt.timedelta(0):
        raise InvalidValueError(f"{name}: the duration must be positive, got {value!r}")
    return parsed


def format_duration(value: dt.timedelta) -> str:
    """A duration in the largest Paimon unit that keeps it exact (``2 d``, ``90 min``, ``1500 ms``, ``7 µs``):
    :func:`parse_duration` reads it back to the same value."""
    micros = value // dt.timedelta(microseconds=1)
    for label, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000),
                        ("ms", 1_000)):
        if micros % size == 0:
            return f"{micros // size} {label}"
    return f"{micros} µs"


# ---------------------------------------------------------------------------------------------------------
# Counts and booleans
# ---------------------------------------------------------------------------------------------------------

def count(value: Any, name: str, *, minimum: int | None = 1, default: int | None = None) -> int:
    """A whole number at or above ``minimum`` (None: any), or ``default`` when ``value`` is None and a default is
    given."""
    if value is None and default is not None:
        return default
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _WHOLE.fullmatch(value):
        number = int(value)
    else:
        number = None
    if number is None:
        raise _refuse(name, "a whole number", value)
    if minimum is not None and number < minimum:
        raise InvalidValueError(f"{name}: must be at least {minimum}, got {number}")
    return number


def level_map(value: Any, name: str, example: str) -> dict[int, str]:
    """Paimon's map option keyed by LSM level ('level:value' pairs separated by commas, as
    `metadata.stats-mode.per.level` or `file.compression.per.level`): {level: value text}."""
    out: dict[int, str] = {}
    for pair in filter(None, (p.strip() for p in str(value or "").split(","))):
        level, sep, text = pair.partition(":")
        if not sep or not level.strip().isdigit() or not text.strip():
            raise InvalidValueError(f"{name}: {pair!r} is not 'level:value' (example: {example})")
        out[int(level)] = text.strip()
    return out


def boolean(value: Any, name: str, *, default: bool | None = None) -> bool:
    """``True``/``False``, ``1``/``0``, or their text in any case (``'true'``, ``'yes'``, ``'on'``, ``'1'`` and
    the opposites). With a ``default``, None or blank text means "not given"."""
    if default is not None and (value is None or isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _BOOLEAN_TEXT:
        return _BOOLEAN_TEXT[value.strip().lower()]
    raise _refuse(name, BOOLEAN_FORMS, value)


def option_boolean(value: Any, key: str) -> bool:
    """A table option's boolean exactly as Paimon reads it (``OptionsUtils.convertToBoolean``): ``true`` or
    ``false`` in any case; anything else would be refused by Paimon too."""
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("true", "false"):
        return text == "true"
    raise _refuse(key, "'true' or 'false' (any case)", value)


# ---------------------------------------------------------------------------------------------------------
# Tag names
# ---------------------------------------------------------------------------------------------------------

def existing_tag_name(value: Any, name: str = "tag name") -> str:
    """A name that stays inside ``tag/`` (used to look up tags, which other tools may have named freely)."""
    if not isinstance(value, str):
        raise _refuse(name, "a tag name (text)", value)
    if not value.strip():
        raise InvalidValueError(f"{name}: must not be blank")
    if "/" in value or "\\" in value:
        raise InvalidValueError(f"{name}: {value!r} must not contain '/' or '\\'")
    if ".." in value:
        raise InvalidValueError(f"{name}: {value!r} must not contain '..'")
    if _CONTROL.search(value):
        raise InvalidValueError(f"{name}: {value!r} must not contain control characters")
    return value


def tag_name(value: Any, name: str = "tag name") -> str:
    """A name a new tag may have: :func:`existing_tag_name`, at most 255 characters and not purely numeric
    (Paimon would read it as a snapshot id)."""
    existing_tag_name(value, name)
    if len(value) > MAX_TAG_NAME_LENGTH:
        raise InvalidValueError(
            f"{name}: is {len(value)} characters long; at most {MAX_TAG_NAME_LENGTH} are allowed")
    if _WHOLE.fullmatch(value):
        raise InvalidValueError(
            f"{name}: {value!r} is purely numeric and would be mistaken for a snapshot id; add a letter or a dash")
    return str(value)


def is_safe_tag_name(value: Any) -> bool:
    """Whether :func:`existing_tag_name` accepts ``value`` (a name that can be looked up at all)."""
    try:
        existing_tag_name(value)
    except InvalidValueError:
        return False
    return True
