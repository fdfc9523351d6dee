"""The values module: every accepted form of a value reads the same, and every bad one is refused naming the
argument and the forms accepted."""

from __future__ import annotations

import datetime as dt

import pendulum
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_paimon.format import InvalidOptionError, InvalidValueError, PaimonError
from airflow_paimon.format.upkeep.expire_policy import ExpirePolicy
from airflow_paimon.format.values import (
    age_or_instant,
    boolean,
    count,
    duration,
    epoch_millis,
    existing_tag_name,
    format_duration,
    instant,
    is_safe_tag_name,
    millis_before,
    option_boolean,
    parse_duration,
    tag_name,
)

UTC = dt.timezone.utc
# Whole milliseconds between years 1 and 9999 would overflow some forms; keep to 1900..2200.
MILLIS = st.integers(min_value=-2_208_988_800_000, max_value=7_258_118_400_000)
OFFSETS = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))


def test_the_error_is_a_paimon_error_and_a_value_error_naming_argument_and_forms():
    with pytest.raises(InvalidValueError) as raised:
        duration("7 dayz", "time_retained")
    assert isinstance(raised.value, PaimonError) and isinstance(raised.value, ValueError)
    assert isinstance(raised.value, InvalidOptionError)  # what the library raised before: callers keep working
    message = str(raised.value)
    assert message.startswith("time_retained: expected a duration such as '7d'")
    assert "'7 dayz'" in message and "unknown unit 'dayz'" in message


# ---- points in time ----------------------------------------------------------------------------------------

@given(MILLIS, OFFSETS)
def test_every_form_of_one_instant_reads_the_same(millis, zone):
    moment = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=millis)
    local = moment.astimezone(zone)
    naive_utc = moment.replace(tzinfo=None)
    forms = [
        millis,
        float(millis),
        moment,
        local,
        naive_utc,
        pendulum.instance(local),
        local.isoformat(),
        local.isoformat(sep=" "),
        naive_utc.isoformat(),
        naive_utc.isoformat() + "Z",
        naive_utc.isoformat() + "z",
        f"  {naive_utc.isoformat(sep=' ')}  ",
    ]
    for form in forms:
        assert epoch_millis(form, "as_of") == millis, form
        assert instant(form, "as_of") == moment and instant(form, "as_of").tzinfo == UTC, form


@given(st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1)))
def test_a_date_is_its_midnight_in_utc(day):
    midnight = dt.datetime.combine(day, dt.time(), tzinfo=UTC)
    for form in (day, pendulum.date(day.year, day.month, day.day), day.isoformat()):
        assert instant(form) == midnight


def test_a_naive_value_is_utc():
    assert epoch_millis("2026-11-20 02:00") == epoch_millis("2026-11-20T03:00:00+01:00")
    assert epoch_millis(dt.datetime(2026, 11, 20, 2)) == epoch_millis("2026-11-20T02:00:00Z")
    assert epoch_millis("2026-11-20") == int(dt.datetime(2026, 11, 20, tzinfo=UTC).timestamp()) * 1000


@pytest.mark.parametrize("value", ["yesterday", "", "  ", "2026-13-01", "7d", True, None, [2026], float("nan")])
def test_what_is_not_a_point_in_time(value):
    with pytest.raises(InvalidValueError, match=r"^to_time: .* is not a point in time.*; expected ISO 8601"):
        instant(value, "to_time")


# ---- durations -----------------------------------------------------------------------------------------------

DURATIONS = st.integers(min_value=0, max_value=10**15).map(lambda us: dt.timedelta(microseconds=us))


@given(DURATIONS)
def test_durations_round_trip_through_paimon_syntax(value):
    text = format_duration(value)
    assert parse_duration(text) == value
    assert duration(text, "age") == duration(value, "age") == value
    assert parse_duration(text.replace(" ", "")) == value  # the space is optional
    assert parse_duration(text.upper().replace("Μ", "µ")) == value  # labels in any case


@given(st.integers(min_value=0, max_value=10**6),
       st.sampled_from([("d", "days"), ("day", "days"), ("days", "days"), ("h", "hours"), ("hours", "hours"),
                        ("min", "minutes"), ("m", "minutes"), ("minutes", "minutes"), ("s", "seconds"),
                        ("secs", "seconds"), ("ms", "milliseconds"), ("millis", "milliseconds"),
                        ("µs", "microseconds"), ("micros", "microseconds"), ("", "milliseconds")]))
def test_paimon_unit_labels(number, label_unit):
    label, unit = label_unit
    assert parse_duration(f"{number}{label}") == parse_duration(f"{number} {label}") == \
        dt.timedelta(**{unit: number})


@pytest.mark.parametrize("text", ["", "d", "1.5d", "-1d", "+1d", "1 week", "1d2h", "forever"])
def test_what_is_not_a_duration(text):
    with pytest.raises(InvalidValueError, match=r"^older_than_age: expected a duration such as '7d'"):
        duration(text, "older_than_age")


def test_negative_and_zero_durations():
    with pytest.raises(InvalidValueError, match="older_than: a duration must not be negative"):
        duration(dt.timedelta(hours=-1), "older_than")
    assert duration("0 s", "age") == dt.timedelta(0)
    with pytest.raises(InvalidValueError, match="time_retained: the duration must be positive"):
        duration("0 s", "time_retained", positive=True)
    assert duration(pendulum.duration(days=2), "age") == dt.timedelta(days=2)


def test_ages_or_instants():
    assert age_or_instant("3 d", "older_than") == dt.timedelta(days=3)
    assert age_or_instant("2026-11-20", "older_than") == dt.datetime(2026, 11, 20, tzinfo=UTC)
    assert age_or_instant(0, "older_than") == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert millis_before("1 s", "older_than", 5_000) == 4_000
    assert millis_before(dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC), "older_than", 5_000) == 2_000
    with pytest.raises(InvalidValueError, match=r"^older_than: expected a duration .* or a point in time"):
        age_or_instant("7 dayz", "older_than")
    with pytest.raises(InvalidValueError, match=r"^older_than: expected a duration .* or a point in time"):
        age_or_instant([1], "older_than")


# ---- counts and booleans ---------------------------------------------------------------------------------------

@given(st.integers(min_value=1, max_value=2**63))
def test_every_form_of_a_count_reads_the_same(number):
    for form in (number, str(number), f" +{number} ", float(number) if number < 2**52 else number):
        assert count(form, "retain_min") == number


@pytest.mark.parametrize("value, match", [
    (0, "retain_min: must be at least 1, got 0"),
    ("-3", "retain_min: must be at least 1, got -3"),
    ("many", "retain_min: expected a whole number, not 'many'"),
    (1.5, "retain_min: expected a whole number, not 1.5"),
    (True, "retain_min: expected a whole number, not True"),
    (None, "retain_min: expected a whole number"),
])
def test_what_is_not_a_count(value, match):
    with pytest.raises(InvalidValueError, match=match):
        count(value, "retain_min")


def test_count_defaults_and_minimums():
    assert count(None, "max_deletes", default=50) == 50
    assert count("0", "driver_bytes", minimum=0) == 0
    assert count(-7, "commit_identifier", minimum=None) == -7


@pytest.mark.parametrize("text, expected", [
    ("true", True), ("TRUE", True), (" True ", True), ("yes", True), ("on", True), ("1", True), (1, True),
    (True, True), ("false", False), ("False", False), ("no", False), ("OFF", False), ("0", False), (0, False),
    (False, False),
])
def test_booleans(text, expected):
    assert boolean(text, "dry_run") is expected


def test_boolean_defaults_and_refusals():
    assert boolean(None, "dry_run", default=False) is False
    assert boolean("  ", "honour_sequence_field", default=True) is True
    for bad in ("maybe", "none", 2, None, ""):
        with pytest.raises(InvalidValueError, match=r"^reapply: expected True or False"):
            boolean(bad, "reapply")


def test_table_option_booleans_are_read_as_paimon_reads_them():
    assert option_boolean("TRUE", "partition.legacy-name") is True
    assert option_boolean("false", "partition.legacy-name") is False
    for bad in ("yes", "1", " true"):  # Paimon's convertToBoolean neither trims nor takes yes/1
        with pytest.raises(InvalidValueError, match="deletion-vectors.enabled: expected 'true' or 'false'"):
            option_boolean(bad, "deletion-vectors.enabled")


# ---- tag names ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["2026-11-20", "v1.2", "release_1", "Ünïcode", "1a", "a b", "x" * 255])
def test_good_tag_names(name):
    assert tag_name(name) == existing_tag_name(name) == name and is_safe_tag_name(name)


@pytest.mark.parametrize("name, match, looks_like_a_path", [
    ("123", "tag_name: '123' is purely numeric", False),
    (" -5 ", "purely numeric", False),
    ("", "tag_name: must not be blank", True),
    ("a/b", "must not contain '/'", True),
    ("a\\b", "must not contain '/' or", True),
    ("..", "must not contain '..'", True),
    ("a\nb", "control characters", True),
    ("x" * 256, "256 characters long", False),
    (5, "tag_name: expected a tag name", True),
])
def test_bad_tag_names(name, match, looks_like_a_path):
    with pytest.raises(InvalidValueError, match=match):
        tag_name(name, "tag_name")
    assert is_safe_tag_name(name) is not looks_like_a_path


# ---- the expiry policy ------------------------------------------------------------------------------------------

def test_expire_policy_reads_paimon_options_and_defaults():
    assert ExpirePolicy.from_options({}) == ExpirePolicy(10, 2**31 - 1, dt.timedelta(hours=1), 50, None)
    options = {"snapshot.num-retained.min": " 3 ", "snapshot.num-retained.max": "8",
               "snapshot.time-retained": "2 d", "snapshot.expire.limit": "7"}
    policy = ExpirePolicy.from_options(options)
    assert policy == ExpirePolicy(3, 8, dt.timedelta(days=2), 7, None)
    assert policy.threshold_millis(10 * 86_400_000) == 8 * 86_400_000


def test_expire_policy_overrides():
    options = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "8"}
    policy = ExpirePolicy.from_options(options, retain_min="2", older_than="3 h", max_deletes=5)
    assert (policy.retain_min, policy.retain_max, policy.time_retained, policy.max_deletes) == \
        (2, 8, dt.timedelta(hours=3), 5)
    fixed = policy.override(older_than="2026-11-20")
    assert fixed.older_than == dt.datetime(2026, 11, 20, tzinfo=UTC)
    assert fixed.threshold_millis(0) == epoch_millis("2026-11-20")
    assert fixed.override(older_than="1 h").older_than is None  # an age replaces a fixed time


@pytest.mark.parametrize("options, overrides, match", [
    ({"snapshot.num-retained.min": "-1"}, {}, "snapshot.num-retained.min: must be at least 1, got -1"),
    ({"snapshot.num-retained.min": "5", "snapshot.num-retained.max": "2"}, {},
     "snapshot.num-retained.max: 2 is below snapshot.num-retained.min 5"),
    ({"snapshot.time-retained": "soon"}, {}, "snapshot.time-retained: expected a duration"),
    ({"snapshot.expire.limit": "x"}, {}, "snapshot.expire.limit: expected a whole number"),
    ({}, {"retain_min": 5, "retain_max": 2}, "retain_min and retain_max: retain_min=5 is above retain_max=2"),
    ({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "4"}, {"retain_min": 5},
     "retain_min: retain_min=5 is above retain_max=4 \\(the table's snapshot.num-retained.max\\)"),
    ({}, {"max_deletes": 0}, "max_deletes: must be at least 1, got 0"),
    ({}, {"older_than": "yesterday-ish"}, "older_than: expected a duration"),
])
def test_expire_policy_refusals_name_the_option_or_argument(options, overrides, match):
    with pytest.raises(InvalidValueError, match=match):
        ExpirePolicy.from_options(options, **overrides)


def test_expire_policy_arguments_checked_without_a_table():
    ExpirePolicy.check_arguments(retain_min=1000, older_than="7d")
    with pytest.raises(InvalidValueError, match="retain_min and retain_max"):
        ExpirePolicy.check_arguments(retain_min="10", retain_max="2")
