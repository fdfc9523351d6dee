"""Periodic tags as a library use case (airflow_paimon.format.periodic_tags): plan and apply, without Airflow."""

from __future__ import annotations

import datetime as dt

import pendulum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_paimon import clock
from airflow_paimon.format import periodic_tags
from airflow_paimon.format.errors import InvalidOptionError, PeriodMismatchError, TagAlreadyExistsError
from airflow_paimon.format.periodic_tags import RunTimes, period_of_run
from airflow_paimon.format.periods import PeriodSpec
from tests.e2e.tables import commit_at, create_table
from tests.format.upkeep_helpers import tree_digest
from tests.sizes import scaled


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


def daily(logical_date: pendulum.DateTime) -> RunTimes:
    """A ``@daily`` cron run of Airflow 3: an empty data interval at the logical date."""
    return RunTimes(logical_date, logical_date, logical_date, logical_date)


@pytest.fixture
def table(tmp_path):
    """Tagged daily at 02:30 UTC: s1 11-11 10:00, s2 11-11 23:59:59, s3 11-12 00:30, s4 11-12 02:30:00.001,
    s5 11-13 01:00."""
    t = create_table(str(tmp_path / "wh"), "db.orders", {"tag.create-time": "02:30"})
    for i, when in enumerate((utc(2026, 11, 11, 10), utc(2026, 11, 11, 23, 59, 59), utc(2026, 11, 12, 0, 30),
                              utc(2026, 11, 12, 2, 30, 0, 1000), utc(2026, 11, 13, 1)), start=1):
        assert commit_at(t, when, i) == i
    return t


# ---------------------------------------------------------------------------------------------------------
# Which period a run tags
# ---------------------------------------------------------------------------------------------------------


def test_period_of_a_daily_cron_run_is_the_day_before():
    spec = PeriodSpec(create_time="02:30")
    at = utc(2026, 11, 12)
    period = period_of_run(spec, at, at, at, at)
    assert spec.tag_name(period) == "2026-11-11"
    assert (period.start, period.end) == (utc(2026, 11, 11), utc(2026, 11, 12))
    assert spec.creation_instant(period) == utc(2026, 11, 12, 2, 30)


def test_period_of_a_run_with_a_data_interval_is_that_period():
    spec = PeriodSpec()
    assert spec.tag_name(period_of_run(spec, utc(2026, 11, 11), utc(2026, 11, 12))) == "2026-11-11"
    two_days = PeriodSpec(interval_days=2)
    # 2026-11-11 is day 20403 after the epoch: its 2-day period starts on 2026-11-11.
    assert two_days.tag_name(period_of_run(two_days, utc(2026, 11, 11), utc(2026, 11, 13))) == "2026-11-11"


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (utc(2026, 11, 12, 6), utc(2026, 11, 13, 6)),  # inside one 2-day period, but not the whole of it
        (utc(2026, 11, 11), utc(2026, 11, 12)),  # the first day of a 2-day period only
        (utc(2026, 11, 12), utc(2026, 11, 14)),  # two days, across two periods
    ],
)
def test_a_data_interval_that_is_not_a_period_of_the_table_is_refused(start, end):
    two_days = PeriodSpec(interval_days=2)
    with pytest.raises(PeriodMismatchError, match=r"not one period of the table's calendar \(one tag every 2 days"):
        period_of_run(two_days, start, end)


def test_period_of_a_run_without_data_interval_uses_logical_date_then_run_after():
    spec = PeriodSpec()
    assert spec.tag_name(period_of_run(spec, logical_date=utc(2026, 11, 12, 5))) == "2026-11-11"
    assert spec.tag_name(period_of_run(spec, run_after=utc(2026, 11, 14, 0, 0, 1))) == "2026-11-13"
    with pytest.raises(ValueError, match="no data interval"):
        period_of_run(spec)


def test_run_times_survive_the_trip_through_iso_text():
    times = RunTimes(utc(2026, 11, 11), utc(2026, 11, 12), pendulum.datetime(2026, 11, 11, 1, tz="Europe/Berlin"))
    assert RunTimes.from_iso(times.to_iso()) == times
    assert times.to_iso()["logical_date"] == "2026-11-11T00:00:00+00:00"
    assert times.to_iso()["run_after"] is None


# ---------------------------------------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------------------------------------


def test_plan_names_the_period_and_says_whether_the_tag_is_due(table):
    early = periodic_tags.plan(table, daily(utc(2026, 11, 12)), now=utc(2026, 11, 12, 2, 29, 59))
    assert (early.table, early.name, early.due) == ("db.orders", "2026-11-11", utc(2026, 11, 12, 2, 30))
    assert (early.period.start, early.period.end) == (utc(2026, 11, 11), utc(2026, 11, 12))
    assert not early.is_due
    assert early.at(utc(2026, 11, 12, 2, 30)).is_due
    assert early.to_dict() == {"table": "db.orders", "tag": "2026-11-11", "period_start": "2026-11-11T00:00:00+00:00",
                               "period_end": "2026-11-12T00:00:00+00:00", "due": "2026-11-12T02:30:00+00:00"}
    # An instant is about the last whole period ending at or before it.
    assert periodic_tags.plan(table, utc(2026, 11, 14, 1), now=utc(2026, 11, 20)).name == "2026-11-13"


def test_plan_reads_the_one_clock_when_not_given_now(table, monkeypatch):
    monkeypatch.setattr(clock, "utcnow", lambda: utc(2026, 11, 12, 2, 29))
    waiting = periodic_tags.plan(table, daily(utc(2026, 11, 12)))
    assert waiting.now == utc(2026, 11, 12, 2, 29) and not waiting.is_due
    monkeypatch.setattr(clock, "utcnow", lambda: utc(2026, 11, 12, 3))
    assert waiting.at().is_due
    assert periodic_tags.latest_due_period(table_spec(table)).start == utc(2026, 11, 11)


def table_spec(table) -> PeriodSpec:
    return PeriodSpec.from_options(table.options())


def test_plan_refuses_a_run_that_is_not_one_period_and_bad_options(table, tmp_path):
    with pytest.raises(PeriodMismatchError, match="not one period"):
        periodic_tags.plan(table, RunTimes(utc(2026, 11, 11, 6), utc(2026, 11, 12, 6)), now=utc(2026, 11, 20))
    bad = create_table(str(tmp_path / "wh2"), "db.bad", {"tag.create-interval": "12h"})
    with pytest.raises(InvalidOptionError, match="tag.create-interval"):
        periodic_tags.plan(bad, daily(utc(2026, 11, 12)), now=utc(2026, 11, 20))


def test_choose_snapshot_waits_until_due_then_takes_the_latest_at_the_due_instant(table):
    waiting = periodic_tags.plan(table, daily(utc(2026, 11, 12)), now=utc(2026, 11, 12, 2, 29, 59))
    choice = periodic_tags.choose_snapshot(table, waiting)
    assert (choice.status, choice.snapshot) == ("wait", None)
    assert "not due until 2026-11-12T02:30:00" in choice.message
    ready = periodic_tags.choose_snapshot(table, waiting.at(utc(2026, 11, 12, 2, 30)))
    assert (ready.status, ready.snapshot.id) == ("ready", 3)  # s4 came 1 ms after the due instant


def test_data_snapshot_is_the_latest_once_it_was_committed_at_or_after_the_period_end(table, tmp_path):
    assert periodic_tags.data_snapshot(table, utc(2026, 11, 13, 1)) == 5  # committed exactly then
    assert periodic_tags.data_snapshot(table, utc(2026, 11, 13, 1, 0, 0, 1000)) is None
    empty = create_table(str(tmp_path / "wh2"), "db.empty")
    assert periodic_tags.data_snapshot(empty, utc(2026, 11, 13)) is None


# ---------------------------------------------------------------------------------------------------------
# apply
# ---------------------------------------------------------------------------------------------------------


def test_apply_creates_then_leaves_unchanged_then_refuses_or_replaces(table):
    created = periodic_tags.apply(table, "2026-11-11", snapshot_id=3)
    assert (created.status, created.tag.snapshot.id, created.previous, created.rewritten) == ("created", 3, None, True)
    assert created.snapshot_time == "2026-11-12T00:30:00+00:00"

    before = tree_digest(table.path)
    again = periodic_tags.apply(table, "2026-11-11", snapshot_id=3)
    assert (again.status, again.rewritten, again.previous.snapshot.id) == ("unchanged", False, 3)
    assert tree_digest(table.path) == before

    with pytest.raises(TagAlreadyExistsError, match="already exists on snapshot 3"):
        periodic_tags.apply(table, "2026-11-11", snapshot_id=1)
    with pytest.raises(TagAlreadyExistsError, match=r"already exists \(on snapshot 3\) and if_exists='fail'"):
        periodic_tags.apply(table, "2026-11-11", snapshot_id=3, if_exists="fail")
    assert tree_digest(table.path) == before

    replaced = periodic_tags.apply(table, "2026-11-11", snapshot_id=1, if_exists="replace")
    assert (replaced.status, replaced.tag.snapshot.id, replaced.previous.snapshot.id) == ("replaced", 1, 3)
    assert table.tags.get("2026-11-11").snapshot.id == 1


def test_apply_refuses_bad_input_and_changes_nothing(table):
    before = tree_digest(table.path)
    with pytest.raises(InvalidOptionError, match="purely numeric"):
        periodic_tags.apply(table, "20261111")
    with pytest.raises(ValueError, match="if_exists must be one of verify, replace, fail"):
        periodic_tags.apply(table, "2026-11-11", if_exists="overwrite")
    assert tree_digest(table.path) == before


def test_apply_reports_the_tags_the_retention_expires(tmp_path):
    t = create_table(str(tmp_path / "wh"), "db.kept", {"tag.num-retained-max": "2"})
    for day in (10, 11, 12, 13):
        commit_at(t, utc(2026, 11, day, 12), day)
    applied = [periodic_tags.apply(t, f"2026-11-{day}", snapshot_id=i, expire_tags=True)
               for i, day in enumerate((10, 11, 12), start=1)]
    assert [a.expired for a in applied] == [(), (), ("2026-11-10",)]
    assert applied[-1].expiry_summary is not None and "2026-11-10" in applied[-1].expiry_summary
    assert sorted(t.tags.names()) == ["2026-11-11", "2026-11-12"]
    # An older period's tag is created, then expired at once: the result says so.
    late = periodic_tags.apply(t, "2026-11-09", snapshot_id=1, expire_tags=True)
    assert (late.status, late.expired) == ("created", ("2026-11-09",))


def test_plan_then_apply_tags_what_a_live_run_would_have(table):
    tag_plan = periodic_tags.plan(table, daily(utc(2026, 11, 12)), now=utc(2026, 11, 20))
    choice = periodic_tags.choose_snapshot(table, tag_plan)
    applied = periodic_tags.apply(table, tag_plan.name, snapshot_id=choice.snapshot.id)
    assert (applied.tag.name, applied.tag.snapshot.id, applied.status) == ("2026-11-11", 3, "created")


# ---------------------------------------------------------------------------------------------------------
# A property: the planned period is the run's, and its tag name names it
# ---------------------------------------------------------------------------------------------------------

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "+08:00", "-03:30")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """One table per set of tag options, made on first use (hypothesis draws the options)."""
    root = tmp_path_factory.mktemp("periodic")
    made: dict[tuple[str, ...], object] = {}

    def get(options: dict[str, str]):
        key = tuple(sorted(options.items()))
        if key not in made:
            made[key] = create_table(str(root / "wh"), f"db.t{len(made)}", options)
        return made[key]

    return get


@settings(max_examples=scaled(150), deadline=None)
@given(
    interval=st.integers(1, 5),
    create_time=st.times().map(lambda t: f"{t.hour:02d}:{t.minute:02d}"),
    zone=st.sampled_from(ZONES),
    formatter=st.sampled_from(("with_dashes", "without_dashes")),
    instant=st.datetimes(min_value=dt.datetime(1969, 1, 1), max_value=dt.datetime(2100, 1, 1),
                         timezones=st.just(dt.timezone.utc)),
    now_offset=st.integers(-3 * 86_400, 3 * 86_400),
)
def test_planned_period_contains_the_instant_and_its_name_reads_back(tables, interval, create_time, zone, formatter,
                                                                     instant, now_offset):
    table = tables({"tag.create-interval": f"{interval}d", "tag.create-time": create_time,
                    "sink.process-time-zone": zone, "tag.period-formatter": formatter})
    spec = PeriodSpec.from_options(table.options())
    containing = spec.period_containing(instant)
    now = instant + dt.timedelta(seconds=now_offset)

    # A run whose data interval is the period holding the instant plans exactly that period.
    run = periodic_tags.plan(table, RunTimes(containing.start, containing.end), now=now)
    assert instant in run.period
    assert spec.parse_tag_name(run.name) == run.period
    assert run.due == spec.creation_instant(run.period) and run.due >= run.period.end
    assert run.is_due == (now >= run.due)

    # An instant alone plans the last whole period before it: the one right before the instant's period.
    before = periodic_tags.plan(table, instant, now=now)
    assert before.period.end <= instant and before.period == spec.previous(containing)
    assert spec.parse_tag_name(before.name) == before.period
