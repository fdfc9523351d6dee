"""The table options that lay out a table's periodic tags, read into the fields of a ``PeriodSpec``.

Two sets of options give the calendar: this package's own (``tag.create-time``, ``tag.create-interval``,
``sink.process-time-zone``) and Paimon's automatic creation (``tag.automatic-creation`` = ``process-time`` or
``watermark`` with the ``daily`` ``tag.creation-period`` and ``tag.creation-delay``), which maps onto the same
calendar: one-day periods due at midnight + delay, named exactly as Paimon names them. Options that contradict
each other are refused, naming both.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pendulum

from .errors import InvalidOptionError
from .period_values import (
    format_create_time,
    parse_create_time,
    parse_delay,
    parse_formatter,
    parse_interval_days,
    parse_num_retained,
    parse_positive_duration,
    parse_timezone,
)

__all__ = [
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
    "OptionReader",
    "spec_fields_from_options",
]

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

_T = TypeVar("_T")


class OptionReader:
    """Reads single options, turning a parser's ``ValueError`` into an error naming the option and its value."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = {str(k): v for k, v in options.items()}

    def get(self, key: str) -> str | None:
        value = self.options.get(key)
        return None if value is None else str(value)

    def read(self, key: str, parse: Callable[[str], _T], default: str | None = None) -> _T | None:
        raw = self.get(key)
        if raw is None:
            if default is None:
                return None
            raw = default
        try:
            return parse(raw)
        except ValueError as exc:
            raise InvalidOptionError(f"invalid value for table option '{key}': {raw!r}: {exc}") from None


def spec_fields_from_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``PeriodSpec`` fields a table's options give (see ``PeriodSpec.from_options``).

    Raises ``InvalidOptionError`` naming the option and the value for every invalid or contradicting one."""
    reader = OptionReader(options)
    get, read = reader.get, reader.read

    mode_raw = get(OPT_AUTOMATIC_CREATION)
    mode = (mode_raw or "none").strip().lower()
    if mode not in ("none", "process-time", "watermark", "batch"):
        raise InvalidOptionError(
            f"invalid value for table option '{OPT_AUTOMATIC_CREATION}': {mode_raw!r}: expected one of "
            f"none, process-time, watermark, batch"
        )

    interval_days = read(OPT_CREATE_INTERVAL, parse_interval_days)
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
        delay = read(OPT_CREATION_DELAY, parse_delay) or _dt.timedelta(0)
        paimon_time = (_dt.datetime.combine(_dt.date(1970, 1, 1), _dt.time(0, 0)) + delay).time()
        if interval_days is not None and interval_days != 1:
            raise InvalidOptionError(
                f"invalid value for table option '{OPT_CREATE_INTERVAL}': {get(OPT_CREATE_INTERVAL)!r}: "
                f"'{OPT_AUTOMATIC_CREATION}' = '{mode}' creates daily tags, so the interval must be 1d"
            )
        if create_time is not None and create_time != paimon_time:
            raise InvalidOptionError(
                f"invalid value for table option '{OPT_CREATE_TIME}': {get(OPT_CREATE_TIME)!r}: "
                f"'{OPT_AUTOMATIC_CREATION}' = '{mode}' creates tags at midnight + '{OPT_CREATION_DELAY}' "
                f"({format_create_time(paimon_time)}); remove one of the two"
            )
        interval_days, create_time = 1, paimon_time
        if mode == "watermark":
            timezone = read(OPT_WATERMARK_TIME_ZONE, parse_timezone, default="UTC")
        else:
            timezone = read(OPT_PROCESS_TIME_ZONE, parse_timezone)
    else:
        timezone = read(OPT_PROCESS_TIME_ZONE, parse_timezone)

    return {
        "interval_days": 1 if interval_days is None else interval_days,
        "create_time": _dt.time(0, 0) if create_time is None else create_time,
        "timezone": pendulum.UTC if timezone is None else timezone,
        "formatter": read(OPT_PERIOD_FORMATTER, parse_formatter, default="with_dashes"),
        "num_retained_max": read(OPT_NUM_RETAINED_MAX, parse_num_retained),
        "default_time_retained": read(OPT_DEFAULT_TIME_RETAINED, parse_positive_duration),
    }
