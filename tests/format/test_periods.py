"""The periodic-tag calendar (airflow_paimon.format.periods): fast, no Airflow."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pendulum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.period_values import (
    format_duration,
    parse_create_time,
    parse_duration,
    parse_formatter,
    parse_timezone,
    timezone_name,
)
from airflow_paimon.format.periods import EPOCH, Period, PeriodSpec
from tests.sizes import scaled

UTC = pendulum.UTC
BERLIN = "Europe/Berlin"


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


def local(tz: str, *args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz=tz)


# ---------------------------------------------------------------------------------------------------------
# parse_duration
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1d", dt.timedelta(days=1)),
        ("2 d", dt.timedelta(days=2)),
        ("48h", dt.timedelta(hours=48)),
        ("2 days", dt.timedelta(days=2)),
        ("1 day", dt.timedelta(days=1)),
        ("1 DAY", dt.timedelta(days=1)),
        ("  7d  ", dt.timedelta(days=7)),
        ("12h", dt.timedelta(hours=12)),
        ("1 hour", dt.timedelta(hours=1)),
        ("3 hours", dt.timedelta(hours=3)),
        ("30 min", dt.timedelta(minutes=30)),
        ("30min", dt.timedelta(minutes=30)),
        ("5m", dt.timedelta(minutes=5)),
        ("1 minute", dt.timedelta(minutes=1)),
        ("2 minutes", dt.timedelta(minutes=2)),
        ("90 s", dt.timedelta(seconds=90)),
        ("3 sec", dt.timedelta(seconds=3)),
        ("3 secs", dt.timedelta(seconds=3)),
        ("90 seconds", dt.timedelta(seconds=90)),
        ("500ms", dt.timedelta(milliseconds=500)),
        ("500 millis", dt.timedelta(milliseconds=500)),
        ("500", dt.timedelta(milliseconds=500)),  # no unit: milliseconds, as in Paimon
        ("0", dt.timedelta(0)),
        ("10 µs", dt.timedelta(microseconds=10)),
        ("10 micros", dt.timedelta(microseconds=10)),
        ("2000 ns", dt.timedelta(microseconds=2)),
        ("2000 nanoseconds", dt.timedelta(microseconds=2)),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "  ", "d", "1.5d", "-1d", "+1d", "1 week", "1 d ays", "abc", "1d2h", "1,5 h"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert repr(text) in str(err.value) or "duration" in str(err.value)


def test_parse_duration_rejects_non_strings():
    with pytest.raises(ValueError):
        parse_duration(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        parse_duration(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (dt.timedelta(days=2), "2 d"),
        (dt.timedelta(hours=36), "36 h"),
        (dt.timedelta(minutes=90), "90 min"),
        (dt.timedelta(seconds=61), "61 s"),
        (dt.timedelta(milliseconds=1500), "1500 ms"),
        (dt.timedelta(microseconds=7), "7 µs"),
    ],
)
def test_format_duration_round_trips(value, text):
    assert format_duration(value) == text
    assert parse_duration(text) == value


# ---------------------------------------------------------------------------------------------------------
# other option values
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00:00", dt.time(0, 0)),
        ("02:30", dt.time(2, 30)),
        ("2:30", dt.time(2, 30)),
        ("23:59", dt.time(23, 59)),
        (" 12:00 ", dt.time(12, 0)),
        ("02:30:15", dt.time(2, 30, 15)),
        ("00:10:00.5", dt.time(0, 10, 0, 500000)),
    ],
)
def test_parse_create_time(text, expected):
    assert parse_create_time(text) == expected


@pytest.mark.parametrize("text", ["24:00", "12:60", "1230", "noon", "12:3", "", "-1:00", "12:00:60"])
def test_parse_create_time_rejects(text):
    with pytest.raises(ValueError):
        parse_create_time(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("with_dashes", "yyyy-MM-dd"),
        ("WITH_DASHES", "yyyy-MM-dd"),
        ("without_dashes", "yyyyMMdd"),
        ("without_dashes_and_spaces", "yyyyMMdd"),
        ("yyyy-MM-dd", "yyyy-MM-dd"),
        ("yyyyMMdd", "yyyyMMdd"),
    ],
)
def test_parse_formatter(text, expected):
    assert parse_formatter(text) == expected


@pytest.mark.parametrize("text", ["yyyy/MM/dd", "dashes", "", "yyyy-MM-dd HH"])
def test_parse_formatter_rejects(text):
    with pytest.raises(ValueError):
        parse_formatter(text)


@pytest.mark.parametrize(
    ("text", "offset_hours"),
    [
        ("+08:00", 8),
        ("+8", 8),
        ("GMT-08:00", -8),  # Java's sign convention: GMT-08:00 is eight hours behind UTC
        ("UTC+8", 8),
        ("UTC+05:30", 5.5),
        ("-0330", -3.5),
    ],
)
def test_parse_timezone_offsets(text, offset_hours):
    tz = parse_timezone(text)
    assert tz.utcoffset(dt.datetime(2026, 1, 1)) == dt.timedelta(hours=offset_hours)
    assert parse_timezone(timezone_name(tz)).utcoffset(dt.datetime(2026, 1, 1)) == dt.timedelta(hours=offset_hours)


@pytest.mark.parametrize("text", [None, "", "UTC", "Z", "GMT", "utc", "+00:00"])
def test_parse_timezone_utc(text):
    assert parse_timezone(text) == UTC


def test_parse_timezone_names_and_objects():
    assert timezone_name(parse_timezone("Europe/Berlin")) == "Europe/Berlin"
    assert timezone_name(parse_timezone(" Asia/Shanghai ")) == "Asia/Shanghai"
    berlin = pendulum.timezone("Europe/Berlin")
    assert parse_timezone(berlin) is berlin
    import zoneinfo

    assert timezone_name(parse_timezone(zoneinfo.ZoneInfo("America/New_York"))) == "America/New_York"
    assert parse_timezone(dt.timezone(dt.timedelta(hours=2))).utcoffset(None) == dt.timedelta(hours=2)


@pytest.mark.parametrize("text", ["Mars/Olympus", "+19:00", "GMT+8:99", "Europe/", "12"])
def test_parse_timezone_rejects(text):
    with pytest.raises(ValueError) as err:
        parse_timezone(text)
    assert repr(text) in str(err.value)


# ---------------------------------------------------------------------------------------------------------
# PeriodSpec construction and from_options
# ---------------------------------------------------------------------------------------------------------


def test_defaults():
    spec = PeriodSpec.from_options({})
    assert spec == PeriodSpec()
    assert spec.interval_days == 1
    assert spec.create_time == dt.time(0, 0)
    assert spec.timezone == UTC
    assert spec.formatter == "yyyy-MM-dd"
    assert spec.num_retained_max is None
    assert spec.default_time_retained is None


def test_from_options_reads_everything():
    spec = PeriodSpec.from_options(
        {
            "tag.create-time": "02:30",
            "tag.create-interval": "2 d",
            "tag.period-formatter": "without_dashes",
            "tag.num-retained-max": "10",
            "tag.default-time-retained": "7d",
            "sink.process-time-zone": BERLIN,
            "bucket": "4",  # unrelated options are ignored
        }
    )
    assert spec.interval_days == 2
    assert spec.create_time == dt.time(2, 30)
    assert spec.timezone_name == BERLIN
    assert spec.formatter == "yyyyMMdd"
    assert spec.num_retained_max == 10
    assert spec.default_time_retained == dt.timedelta(days=7)


@pytest.mark.parametrize(
    ("text", "days"), [("1d", 1), ("2 d", 2), ("48h", 2), ("2 days", 2), ("2880 min", 2), ("7d", 7)]
)
def test_create_interval_forms(text, days):
    assert PeriodSpec.from_options({"tag.create-interval": text}).interval_days == days


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tag.create-time", "25:00"),
        ("tag.create-time", "abc"),
        ("tag.create-interval", "36h"),
        ("tag.create-interval", "12h"),
        ("tag.create-interval", "0d"),
        ("tag.create-interval", "1.5d"),
        ("tag.create-interval", "two days"),
        ("tag.create-interval", "2"),  # a bare number is milliseconds in Paimon
        ("tag.period-formatter", "yyyy/MM/dd"),
        ("tag.num-retained-max", "0"),
        ("tag.num-retained-max", "-1"),
        ("tag.num-retained-max", "x"),
        ("tag.num-retained-max", "1.5"),
        ("tag.default-time-retained", "0 s"),
        ("tag.default-time-retained", "7 weeks"),
        ("sink.process-time-zone", "Mars/Olympus"),
        ("tag.automatic-creation", "sometimes"),
    ],
)
def test_invalid_option_names_option_and_value(key, value):
    with pytest.raises(ValueError) as err:
        PeriodSpec.from_options({key: value})
    message = str(err.value)
    assert key in message
    assert repr(value) in message
    assert isinstance(err.value, InvalidOptionError)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tag.creation-period", "weekly"),
        ("tag.creation-delay", "1d"),
        ("tag.creation-delay", "25h"),
        ("tag.creation-delay", "soon"),
        ("sink.process-time-zone", "Nowhere/Land"),
        ("tag.creation-period-duration", "1d"),
    ],
)
def test_invalid_auto_tag_option_names_option_and_value(key, value):
    with pytest.raises(ValueError) as err:
        PeriodSpec.from_options({"tag.automatic-creation": "process-time", key: value})
    assert key in str(err.value)
    assert repr(value) in str(err.value)


@pytest.mark.parametrize("period", ["hourly", "two-hours", "HOURLY"])
def test_sub_daily_auto_tags_are_refused_clearly(period):
    with pytest.raises(ValueError, match="support only daily periods") as err:
        PeriodSpec.from_options({"tag.automatic-creation": "watermark", "tag.creation-period": period})
    assert "tag.creation-period" in str(err.value)


def test_paimon_auto_tag_options():
    spec = PeriodSpec.from_options(
        {
            "tag.automatic-creation": "process-time",
            "tag.creation-period": "daily",
            "tag.creation-delay": "10 min",
            "tag.period-formatter": "without_dashes",
            "sink.process-time-zone": "Asia/Shanghai",
            "tag.num-retained-max": "90",
        }
    )
    assert spec == PeriodSpec(
        interval_days=1,
        create_time=dt.time(0, 10),
        timezone="Asia/Shanghai",
        formatter="yyyyMMdd",
        num_retained_max=90,
    )


def test_paimon_auto_tag_defaults_and_case():
    spec = PeriodSpec.from_options({"tag.automatic-creation": "PROCESS-TIME"})
    assert (spec.interval_days, spec.create_time, spec.timezone) == (1, dt.time(0, 0), UTC)


def test_watermark_mode_uses_the_watermark_time_zone():
    spec = PeriodSpec.from_options(
        {
            "tag.automatic-creation": "watermark",
            "tag.creation-delay": "1 h",
            "sink.watermark-time-zone": "America/Los_Angeles",
            "sink.process-time-zone": BERLIN,
        }
    )
    assert spec.timezone_name == "America/Los_Angeles"
    assert spec.create_time == dt.time(1, 0)
    # Paimon's default watermark zone is UTC
    assert PeriodSpec.from_options({"tag.automatic-creation": "watermark"}).timezone == UTC


def test_creation_delay_with_seconds():
    spec = PeriodSpec.from_options({"tag.automatic-creation": "process-time", "tag.creation-delay": "90 s"})
    assert spec.create_time == dt.time(0, 1, 30)
    assert spec.create_time_text == "00:01:30"


def test_auto_tags_conflicting_with_our_options():
    with pytest.raises(ValueError, match="tag.create-interval"):
        PeriodSpec.from_options({"tag.automatic-creation": "process-time", "tag.create-interval": "2d"})
    with pytest.raises(ValueError, match="tag.create-time"):
        PeriodSpec.from_options(
            {"tag.automatic-creation": "process-time", "tag.creation-delay": "1 h", "tag.create-time": "02:00"}
        )
    # consistent values are fine
    spec = PeriodSpec.from_options(
        {
            "tag.automatic-creation": "process-time",
            "tag.creation-delay": "1 h",
            "tag.create-time": "01:00",
            "tag.create-interval": "1d",
        }
    )
    assert spec.create_time == dt.time(1, 0)


def test_batch_and_none_modes_use_our_options():
    for mode in ("none", "batch"):
        spec = PeriodSpec.from_options(
            {"tag.automatic-creation": mode, "tag.create-time": "03:00", "tag.create-interval": "2d"}
        )
        assert (spec.interval_days, spec.create_time) == (2, dt.time(3, 0))


def test_overrides():
    options = {"tag.create-time": "02:30", "sink.process-time-zone": BERLIN}
    spec = PeriodSpec.from_options(options, timezone="UTC", create_time="03:00", interval_days="2d")
    assert (spec.interval_days, spec.create_time, spec.timezone) == (2, dt.time(3, 0), UTC)
    spec = PeriodSpec.from_options(options, timezone=None, num_retained_max=5, default_time_retained="12h")
    assert spec.timezone_name == BERLIN
    assert spec.num_retained_max == 5
    assert spec.default_time_retained == dt.timedelta(hours=12)
    with pytest.raises(TypeError, match="interval"):
        PeriodSpec.from_options({}, interval=2)
    with pytest.raises(ValueError):
        PeriodSpec.from_options({}, interval_days=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"interval_days": 0},
        {"interval_days": -1},
        {"interval_days": True},
        {"interval_days": 1.5},
        {"create_time": "24:00"},
        {"timezone": "Mars/Olympus"},
        {"formatter": "yyyy"},
        {"num_retained_max": 0},
        {"num_retained_max": "3"},
        {"default_time_retained": dt.timedelta(0)},
        {"default_time_retained": 5},
    ],
)
def test_spec_validation(kwargs):
    with pytest.raises(ValueError):
        PeriodSpec(**kwargs)


def test_spec_is_frozen_and_normalised():
    spec = PeriodSpec(create_time="2:30", timezone=BERLIN, formatter="without_dashes", default_time_retained="1d")
    assert spec.create_time == dt.time(2, 30)
    assert spec.formatter == "yyyyMMdd"
    assert spec.default_time_retained == dt.timedelta(days=1)
    assert spec == PeriodSpec(
        create_time=dt.time(2, 30), timezone=BERLIN, formatter="yyyyMMdd", default_time_retained=dt.timedelta(days=1)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.interval_days = 3  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------------------
# the calendar
# ---------------------------------------------------------------------------------------------------------


def test_daily_airflow_example():
    """A @daily run (Airflow 3: empty interval at the logical date) tags the day that just ended."""
    spec = PeriodSpec()
    logical = utc(2026, 11, 12)
    period = spec.period_for_interval(logical, logical)
    assert period == Period(utc(2026, 11, 11), utc(2026, 11, 12))
    assert spec.tag_name(period) == "2026-11-11"
    assert spec.creation_instant(period) == utc(2026, 11, 12)
    assert spec.period_for_interval(None, logical) == period
    assert spec.period_for_interval(logical, None) == period
    # A data-interval schedule gives [11-11, 11-12): the same period
    assert spec.period_for_interval(utc(2026, 11, 11), utc(2026, 11, 12)) == period


def test_period_for_interval_errors():
    spec = PeriodSpec()
    with pytest.raises(ValueError):
        spec.period_for_interval(None, None)
    with pytest.raises(ValueError, match="aware"):
        spec.period_for_interval(dt.datetime(2026, 11, 12), None)
    with pytest.raises(ValueError, match="before it starts"):
        spec.period_for_interval(utc(2026, 11, 12), utc(2026, 11, 11))
    with pytest.raises(TypeError):
        spec.period_containing("2026-11-12")  # type: ignore[arg-type]


def test_period_for_interval_needs_exactly_one_period():
    from airflow_paimon.format.periods import PeriodMismatchError

    berlin = PeriodSpec(timezone=BERLIN)
    # The 25-hour day when daylight saving time ends is one period in Berlin...
    start = pendulum.datetime(2026, 10, 25, tz=BERLIN)
    assert berlin.tag_name(berlin.period_for_interval(start, start.add(days=1))) == "2026-10-25"
    # ...but a UTC day, or 24 hours from Berlin's midnight, is not.
    for interval in ((utc(2026, 10, 25), utc(2026, 10, 26)), (start, start.add(hours=24))):
        with pytest.raises(PeriodMismatchError, match="is not one period of the table's calendar"):
            berlin.period_for_interval(*interval)


def test_two_day_periods_at_0230():
    spec = PeriodSpec(interval_days=2, create_time="02:30")
    assert (dt.date(2026, 11, 11) - EPOCH).days % 2 == 0  # 2026-11-11 starts a period
    period = spec.period_containing(utc(2026, 11, 12, 10))
    assert period == Period(utc(2026, 11, 11), utc(2026, 11, 13))
    assert spec.tag_name(period) == "2026-11-11"
    assert spec.creation_instant(period) == utc(2026, 11, 13, 2, 30)
    # an Airflow run with logical date 2026-11-12 and an empty interval: the last whole period
    previous = spec.period_for_interval(utc(2026, 11, 12), utc(2026, 11, 12))
    assert previous == Period(utc(2026, 11, 9), utc(2026, 11, 11))
    assert spec.tag_name(previous) == "2026-11-09"
    assert spec.creation_instant(previous) == utc(2026, 11, 11, 2, 30)
    assert spec.next(previous) == period
    assert spec.previous(period) == previous
    # the period's own interval, as TagPeriodTimetable gives it
    assert spec.period_for_interval(period.start, period.end) == period


def test_periods_are_epoch_aligned():
    for interval in (1, 2, 3, 7, 10):
        spec = PeriodSpec(interval_days=interval)
        assert spec.period_containing(utc(1970, 1, 1)).start == utc(1970, 1, 1)
        for day in range(-30, 30):
            date = dt.date(2026, 3, 1) + dt.timedelta(days=day)
            period = spec.period_for_day(date)
            assert (period.first_day - EPOCH).days % interval == 0
            assert period.first_day <= date < period.first_day + dt.timedelta(days=interval)


def test_before_the_epoch():
    spec = PeriodSpec(interval_days=2)
    period = spec.period_containing(utc(1969, 12, 31, 12))
    assert period == Period(utc(1969, 12, 30), utc(1970, 1, 1))
    assert spec.tag_name(period) == "1969-12-30"


def test_boundaries():
    spec = PeriodSpec()
    midnight = utc(2026, 11, 12)
    assert spec.period_containing(midnight).start == midnight
    assert spec.period_containing(midnight.subtract(microseconds=1)).end == midnight
    assert spec.last_period_ending_at_or_before(midnight).end == midnight
    assert spec.last_period_ending_at_or_before(midnight.add(hours=23)).end == midnight
    assert midnight in spec.period_containing(midnight)
    assert midnight not in spec.previous(spec.period_containing(midnight))


def test_other_time_zone_inputs_are_converted():
    spec = PeriodSpec(timezone=BERLIN)
    # 2026-11-11T23:30Z is 2026-11-12 00:30 in Berlin
    period = spec.period_containing(utc(2026, 11, 11, 23, 30))
    assert spec.tag_name(period) == "2026-11-12"
    assert period.start == local(BERLIN, 2026, 11, 12)
    assert period.start.timezone_name == BERLIN
    assert spec.local_date(utc(2026, 11, 11, 23, 30)) == dt.date(2026, 11, 12)


def test_fixed_offset_zone():
    spec = PeriodSpec(timezone="+08:00")
    period = spec.period_containing(utc(2026, 11, 11, 16))
    assert period.start == utc(2026, 11, 11, 16)
    assert spec.tag_name(period) == "2026-11-12"


def test_dst_berlin_keeps_local_calendar_days():
    spec = PeriodSpec(create_time="02:30", timezone=BERLIN)
    # spring forward: 2026-03-29 02:00 -> 03:00, a 23-hour day
    spring = spec.period_for_day(dt.date(2026, 3, 29))
    assert spring.start == local(BERLIN, 2026, 3, 29)
    assert spring.end == local(BERLIN, 2026, 3, 30)
    assert (spring.end - spring.start).in_hours() == 23
    # fall back: 2026-10-25 03:00 -> 02:00, a 25-hour day
    fall = spec.period_for_day(dt.date(2026, 10, 25))
    assert (fall.end - fall.start).in_hours() == 25
    assert spec.tag_name(fall) == "2026-10-25"
    # the tag of 2026-03-28 is due at 2026-03-29 02:30, which does not exist: due when the clock jumps
    assert spec.creation_instant(spec.period_for_day(dt.date(2026, 3, 28))) == utc(2026, 3, 29, 1)
    # the tag of 2026-10-24 is due at 2026-10-25 02:30, which happens twice: the first time (02:30+02:00).
    # (compared in UTC: Python never finds a repeated wall time equal to an instant of another zone)
    due = spec.creation_instant(spec.period_for_day(dt.date(2026, 10, 24)))
    assert due.in_timezone("UTC") == utc(2026, 10, 25, 0, 30)
    assert due.utcoffset() == dt.timedelta(hours=2)
    # an instant in the repeated hour belongs to the right period and is ordered correctly
    second_0230 = utc(2026, 10, 25, 1, 30).in_timezone(BERLIN)
    assert second_0230 in spec.period_for_day(dt.date(2026, 10, 25))
    assert spec.tag_name(spec.last_period_created_at_or_before(second_0230)) == "2026-10-24"
    # ordinary days: 02:30 local
    assert spec.creation_instant(spec.period_for_day(dt.date(2026, 7, 1))) == local(BERLIN, 2026, 7, 2, 2, 30)


def test_dst_berlin_two_day_periods_at_0230():
    spec = PeriodSpec(interval_days=2, create_time="02:30", timezone=BERLIN)
    # 2026-03-28 starts a 2-day period (days since epoch are even); it spans the spring-forward night
    period = spec.period_containing(local(BERLIN, 2026, 3, 29, 12))
    assert period == Period(local(BERLIN, 2026, 3, 28), local(BERLIN, 2026, 3, 30))
    assert (period.end - period.start).in_hours() == 47
    assert spec.creation_instant(period) == local(BERLIN, 2026, 3, 30, 2, 30)
    assert spec.tag_name(period) == "2026-03-28"
    fall = spec.period_containing(local(BERLIN, 2026, 10, 25, 12))
    assert fall == Period(local(BERLIN, 2026, 10, 24), local(BERLIN, 2026, 10, 26))
    assert (fall.end - fall.start).in_hours() == 49
    # local midnights, not 48-hour steps in UTC
    for start in (period.start, fall.start, spec.next(fall).start):
        assert (start.hour, start.minute) == (0, 0)


def test_midnight_in_a_dst_gap():
    # Sao Paulo moved its clocks from 00:00 to 01:00 on 2018-11-04: that day starts at 01:00 local
    spec = PeriodSpec(timezone="America/Sao_Paulo")
    period = spec.period_for_day(dt.date(2018, 11, 4))
    assert period.start == utc(2018, 11, 4, 3)
    assert (period.start.hour, period.start.minute) == (1, 0)
    assert spec.previous(period).end == period.start
    assert spec.period_containing(utc(2018, 11, 4, 2, 59)) == spec.previous(period)
    assert spec.period_containing(utc(2018, 11, 4, 3)) == period


def test_tag_names_and_parsing():
    dashes = PeriodSpec()
    plain = PeriodSpec(formatter="without_dashes")
    period = dashes.period_for_day(dt.date(2026, 1, 5))
    assert dashes.tag_name(period) == "2026-01-05"
    assert plain.tag_name(period) == "20260105"
    assert dashes.parse_tag_name("2026-01-05") == period
    assert plain.parse_tag_name("20260105") == period
    assert dashes.is_periodic_tag("2026-01-05")
    for name in [
        "20260105",
        "2026-1-05",
        "2026-02-30",
        "2026-13-01",
        "2026-01-05 00",
        "latest",
        "",
        "v1",
        "batch-write-2026-01-05",
        " 2026-01-05",
        "2026-01-05x",
    ]:
        assert dashes.parse_tag_name(name) is None, name
    assert plain.parse_tag_name("2026-01-05") is None
    assert dashes.parse_tag_name(None) is None  # type: ignore[arg-type]


def test_parse_tag_name_only_accepts_period_starts():
    spec = PeriodSpec(interval_days=2)
    assert spec.parse_tag_name("2026-11-11") == Period(utc(2026, 11, 11), utc(2026, 11, 13))
    assert spec.parse_tag_name("2026-11-12") is None  # inside a period, not its first day


def test_last_period_created_at_or_before():
    spec = PeriodSpec(create_time="02:30")
    assert spec.tag_name(spec.last_period_created_at_or_before(utc(2026, 11, 12, 2, 29))) == "2026-11-10"
    assert spec.tag_name(spec.last_period_created_at_or_before(utc(2026, 11, 12, 2, 30))) == "2026-11-11"
    late = PeriodSpec(create_time="23:00", interval_days=3)
    period = late.last_period_created_at_or_before(utc(2026, 11, 12))
    assert late.creation_instant(period) <= utc(2026, 11, 12) < late.creation_instant(late.next(period))


def test_describe():
    assert "2 days" in PeriodSpec(interval_days=2, create_time="02:30").describe()
    assert "02:30" in PeriodSpec(create_time="02:30").describe()


TIMEZONES = [
    "UTC",
    BERLIN,
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/New_York",
    "+08:00",
    "Pacific/Chatham",
]


@settings(max_examples=scaled(300), deadline=None)
@given(
    seconds=st.integers(min_value=-10 * 365 * 86400, max_value=80 * 365 * 86400),
    interval=st.integers(min_value=1, max_value=10),
    minutes=st.integers(min_value=0, max_value=24 * 60 - 1),
    tz=st.sampled_from(TIMEZONES),
    formatter=st.sampled_from(["with_dashes", "without_dashes"]),
)
def test_calendar_properties(seconds, interval, minutes, tz, formatter):
    spec = PeriodSpec(
        interval_days=interval, create_time=dt.time(minutes // 60, minutes % 60), timezone=tz, formatter=formatter
    )
    instant = pendulum.from_timestamp(seconds, tz="UTC")
    period = spec.period_containing(instant)
    assert period.start <= instant < period.end
    assert (period.first_day - EPOCH).days % interval == 0
    assert spec.next(period).start == period.end
    assert spec.previous(spec.next(period)) == period
    assert spec.parse_tag_name(spec.tag_name(period)) == period
    assert spec.creation_instant(period) >= period.end
    assert spec.creation_instant(spec.next(period)) > spec.creation_instant(period)
    assert spec.last_period_ending_at_or_before(instant).end <= instant
    assert spec.period_for_interval(period.start, period.end) == period


# ---------------------------------------------------------------------------------------------------------
# Paimon's own auto-tagging lands on the same calendar
# ---------------------------------------------------------------------------------------------------------


def _paimon_daily_auto_tags(snapshot_millis, zone, delay, formatter):
    """Paimon's TagAutoCreation for daily periods (process-time mode), restated: for each snapshot in
    order, when its local time minus the delay reaches the end of the next expected tag's day, tag it with
    the day before its local date. Returns [(tag name, snapshot millis)]."""
    tz = pendulum.timezone(zone)
    next_tag = None
    tags = []
    for millis in snapshot_millis:
        wall = dt.datetime.fromtimestamp(millis / 1000, tz).replace(tzinfo=None)
        if next_tag is None or wall - delay >= next_tag + dt.timedelta(days=1):
            this_tag = dt.datetime.combine(wall.date(), dt.time()) - dt.timedelta(days=1)
            pattern = "%Y-%m-%d" if formatter == "with_dashes" else "%Y%m%d"
            tags.append((this_tag.strftime(pattern), millis))
            next_tag = this_tag + dt.timedelta(days=1)
    return tags


@pytest.mark.parametrize(
    ("zone", "delay", "formatter"),
    [
        (BERLIN, "150 min", "with_dashes"),
        (BERLIN, "0 ms", "without_dashes"),
        ("Asia/Shanghai", "10 min", "with_dashes"),
        ("America/Sao_Paulo", "30 min", "with_dashes"),
        ("UTC", "1 h", "without_dashes_and_spaces"),
    ],
)
def test_same_names_and_times_as_paimon_auto_tags(zone, delay, formatter):
    delay_td = parse_duration(delay)
    spec = PeriodSpec.from_options(
        {
            "tag.automatic-creation": "process-time",
            "tag.creation-delay": delay,
            "tag.period-formatter": formatter,
            "sink.process-time-zone": zone,
        }
    )
    # snapshots every 37 minutes across both 2026 DST changes in Europe, plus 2018 in Sao Paulo
    starts = [utc(2026, 3, 26), utc(2026, 10, 22), utc(2018, 11, 1)]
    millis = []
    for start in starts:
        t = int(start.timestamp() * 1000)
        millis.extend(t + i * 37 * 60 * 1000 for i in range(7 * 24 * 60 // 37))
    for chunk_start in range(0, len(millis), len(millis) // len(starts)):
        chunk = millis[chunk_start : chunk_start + len(millis) // len(starts)]
        tags = _paimon_daily_auto_tags(chunk, zone, delay_td, formatter)
        assert len(tags) >= 5
        for name, snapshot in tags[1:]:  # Paimon's very first tag skips the delay check
            period = spec.parse_tag_name(name)
            assert period is not None, name
            assert spec.tag_name(period) == name
            due = spec.creation_instant(period)
            snapshot_at = pendulum.from_timestamp(snapshot / 1000)
            # Paimon tags the first snapshot at or after our creation instant
            assert snapshot_at >= due
            earlier = [m for m in chunk if m < snapshot]
            if earlier:
                assert pendulum.from_timestamp(max(earlier) / 1000) < due
