"""TagPeriodTimetable: one run per tag period, due at the period's creation instant."""

from __future__ import annotations

import datetime as dt

import pendulum
import pytest
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction

from airflow_paimon import clock
from airflow_paimon.format.periods import PeriodSpec
from airflow_paimon.timetables import TagPeriodTimetable

pytestmark = pytest.mark.airflow

BERLIN = "Europe/Berlin"


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


def berlin(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz=BERLIN)


@pytest.fixture
def now(monkeypatch):
    """Freeze the timetable's clock: ``now(t)`` sets it."""

    def set_now(value: pendulum.DateTime) -> None:
        monkeypatch.setattr(clock, "utcnow", lambda: value)

    set_now(utc(2030, 1, 1))
    return set_now


def run_infos(timetable, restriction, count, last=None):
    infos = []
    for _ in range(count):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        if info is None:
            break
        infos.append(info)
        last = info.data_interval
    return infos


def test_daily_runs_from_start_date(now):
    timetable = TagPeriodTimetable()
    restriction = TimeRestriction(earliest=utc(2026, 11, 1), latest=None, catchup=True)
    infos = run_infos(timetable, restriction, 3)
    assert infos == [
        DagRunInfo(run_after=utc(2026, 11, 2), data_interval=DataInterval(utc(2026, 11, 1), utc(2026, 11, 2))),
        DagRunInfo(run_after=utc(2026, 11, 3), data_interval=DataInterval(utc(2026, 11, 2), utc(2026, 11, 3))),
        DagRunInfo(run_after=utc(2026, 11, 4), data_interval=DataInterval(utc(2026, 11, 3), utc(2026, 11, 4))),
    ]
    assert infos[0].logical_date == utc(2026, 11, 1)
    # the run's data interval gives back its period and its tag
    spec = timetable.spec
    assert spec.tag_name(timetable.period_of(infos[0].data_interval)) == "2026-11-01"


def test_start_date_inside_a_period_starts_with_the_next_period(now):
    timetable = TagPeriodTimetable(interval="2d")
    # 2026-11-11 starts a 2-day period (epoch-aligned); a start date on 11-12 skips to 11-13
    info = timetable.next_dagrun_info(
        last_automated_data_interval=None, restriction=TimeRestriction(utc(2026, 11, 12, 6), None, True)
    )
    assert info.data_interval == DataInterval(utc(2026, 11, 13), utc(2026, 11, 15))
    info = timetable.next_dagrun_info(
        last_automated_data_interval=None, restriction=TimeRestriction(utc(2026, 11, 11), None, True)
    )
    assert info.data_interval == DataInterval(utc(2026, 11, 11), utc(2026, 11, 13))


def test_two_days_at_0230_berlin(now):
    timetable = TagPeriodTimetable(create_time="02:30", interval="2 d", timezone=BERLIN)
    restriction = TimeRestriction(earliest=berlin(2026, 3, 20), latest=None, catchup=True)
    infos = run_infos(timetable, restriction, 6)
    starts = [i.data_interval.start for i in infos]
    assert starts == [berlin(2026, 3, d) for d in (20, 22, 24, 26, 28, 30)]
    for info in infos:
        assert info.data_interval.end - info.data_interval.start in (dt.timedelta(hours=48), dt.timedelta(hours=47))
        local_run = info.run_after.in_timezone(BERLIN)
        assert (local_run.hour, local_run.minute) == (2, 30)
        assert local_run.date() == info.data_interval.end.in_timezone(BERLIN).date()
        assert info.run_after.timezone_name == "UTC"
    # the period spanning the spring-forward night is 47 hours long
    assert infos[4].data_interval == DataInterval(berlin(2026, 3, 28), berlin(2026, 3, 30))
    assert infos[4].run_after == berlin(2026, 3, 30, 2, 30)


def test_catchup_false_starts_with_the_newest_due_period(now):
    timetable = TagPeriodTimetable(create_time="02:30")
    restriction = TimeRestriction(earliest=utc(2026, 1, 1), latest=None, catchup=False)
    now(utc(2026, 11, 12, 2, 29))  # the tag of 11-11 is not due yet
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
    assert info.data_interval == DataInterval(utc(2026, 11, 10), utc(2026, 11, 11))
    assert info.run_after == utc(2026, 11, 11, 2, 30)
    now(utc(2026, 11, 12, 2, 30))
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
    assert info.data_interval == DataInterval(utc(2026, 11, 11), utc(2026, 11, 12))
    # an old previous run is not caught up either
    info = timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(utc(2026, 10, 1), utc(2026, 10, 2)), restriction=restriction
    )
    assert info.data_interval.start == utc(2026, 11, 11)
    # but a recent one continues normally
    info = timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(utc(2026, 11, 11), utc(2026, 11, 12)), restriction=restriction
    )
    assert info.data_interval == DataInterval(utc(2026, 11, 12), utc(2026, 11, 13))
    assert info.run_after == utc(2026, 11, 13, 2, 30)


def test_catchup_false_respects_a_future_start_date(now):
    now(utc(2026, 11, 12, 12))
    timetable = TagPeriodTimetable()
    info = timetable.next_dagrun_info(
        last_automated_data_interval=None, restriction=TimeRestriction(utc(2026, 12, 1), None, False)
    )
    assert info.data_interval.start == utc(2026, 12, 1)


def test_no_start_date_begins_with_the_newest_due_period(now):
    now(utc(2026, 11, 12, 12))
    timetable = TagPeriodTimetable()
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=TimeRestriction(None, None, True))
    assert info.data_interval == DataInterval(utc(2026, 11, 11), utc(2026, 11, 12))


def test_catchup_continues_after_the_last_run(now):
    timetable = TagPeriodTimetable()
    restriction = TimeRestriction(earliest=utc(2026, 1, 1), latest=None, catchup=True)
    info = timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(utc(2026, 3, 1), utc(2026, 3, 2)), restriction=restriction
    )
    assert info.data_interval == DataInterval(utc(2026, 3, 2), utc(2026, 3, 3))


def test_realigns_after_an_interval_change(now):
    # previous runs were daily; now 2-day periods: the next run is the first whole period after the last data
    timetable = TagPeriodTimetable(interval="2d")
    restriction = TimeRestriction(earliest=utc(2026, 1, 1), latest=None, catchup=True)
    info = timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(utc(2026, 11, 11), utc(2026, 11, 12)), restriction=restriction
    )
    assert info.data_interval == DataInterval(utc(2026, 11, 13), utc(2026, 11, 15))
    # and an empty previous interval (a run from a trigger-style schedule) does not repeat its period
    info = timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(utc(2026, 11, 11), utc(2026, 11, 11)), restriction=restriction
    )
    assert info.data_interval == DataInterval(utc(2026, 11, 13), utc(2026, 11, 15))


def test_end_date(now):
    timetable = TagPeriodTimetable()
    restriction = TimeRestriction(earliest=utc(2026, 11, 1), latest=utc(2026, 11, 3), catchup=True)
    infos = run_infos(timetable, restriction, 10)
    assert [i.data_interval.start for i in infos] == [utc(2026, 11, 1), utc(2026, 11, 2), utc(2026, 11, 3)]


def test_backfill_range_like_airflow_iterates_it(now):
    """Airflow's backfill asks for runs whose logical date lies in [from, to] with catchup=True."""
    timetable = TagPeriodTimetable(create_time="01:00", interval="2d")
    restriction = TimeRestriction(earliest=utc(2026, 11, 1), latest=utc(2026, 11, 10), catchup=True)
    infos = run_infos(timetable, restriction, 10)
    assert [timetable.spec.tag_name(timetable.period_of(i.data_interval)) for i in infos] == [
        "2026-11-01",
        "2026-11-03",
        "2026-11-05",
        "2026-11-07",
        "2026-11-09",
    ]


def test_infer_manual_data_interval():
    timetable = TagPeriodTimetable(create_time="02:30")
    assert timetable.infer_manual_data_interval(run_after=utc(2026, 11, 12, 5)) == DataInterval(
        utc(2026, 11, 11), utc(2026, 11, 12)
    )
    assert timetable.infer_manual_data_interval(run_after=utc(2026, 11, 12)) == DataInterval(
        utc(2026, 11, 11), utc(2026, 11, 12)
    )
    two_days = TagPeriodTimetable(interval="2d", timezone=BERLIN)
    assert two_days.infer_manual_data_interval(run_after=berlin(2026, 11, 12, 9)) == DataInterval(
        berlin(2026, 11, 9), berlin(2026, 11, 11)
    )


def test_serialization_round_trip():
    timetable = TagPeriodTimetable(create_time="02:30", interval="48h", timezone=BERLIN)
    data = timetable.serialize()
    assert data == {"create_time": "02:30", "interval": "2d", "timezone": BERLIN}
    back = TagPeriodTimetable.deserialize(data)
    assert back == timetable
    assert hash(back) == hash(timetable)
    assert back != TagPeriodTimetable(create_time="02:30", interval="1d", timezone=BERLIN)
    assert TagPeriodTimetable.deserialize({}) == TagPeriodTimetable()
    fixed = TagPeriodTimetable(timezone="+08:00")
    assert TagPeriodTimetable.deserialize(fixed.serialize()).spec.timezone_name == "+08:00"


def test_summary_description_repr():
    daily = TagPeriodTimetable()
    assert daily.summary == "tag every 1d at 00:00 UTC"
    assert daily.description == "Every day at 00:00 UTC, for the previous day"
    two = TagPeriodTimetable(create_time="02:30", interval=2, timezone=BERLIN)
    assert two.summary == "tag every 2d at 02:30 Europe/Berlin"
    assert "Every 2 days" in two.description
    assert repr(two) == "TagPeriodTimetable(create_time='02:30', interval='2d', timezone='Europe/Berlin')"
    assert two.type_name == "airflow_paimon.timetables.tag_period.TagPeriodTimetable"
    assert two.periodic and two.can_be_scheduled


def test_from_table_options():
    timetable = TagPeriodTimetable.from_table_options(
        {"tag.automatic-creation": "process-time", "tag.creation-delay": "10 min", "sink.process-time-zone": BERLIN}
    )
    assert timetable == TagPeriodTimetable(create_time="00:10", interval="1d", timezone=BERLIN)
    assert TagPeriodTimetable.from_spec(PeriodSpec(interval_days=3)).interval_text == "3d"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"interval": "36h"},
        {"interval": "0d"},
        {"interval": 0},
        {"interval": "12h"},
        {"interval": "daily"},
        {"interval": True},
        {"interval": dt.timedelta(hours=30)},
        {"create_time": "25:00"},
        {"timezone": "Mars/Olympus"},
    ],
)
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        TagPeriodTimetable(**kwargs)


def test_usable_as_a_dag_schedule():
    from airflow.sdk import DAG

    timetable = TagPeriodTimetable("02:30", "1d", BERLIN)
    with DAG("paimon_tags", schedule=timetable, start_date=berlin(2026, 11, 1)) as dag:
        pass
    assert dag.timetable is timetable


def _backfill_periods(timetable: TagPeriodTimetable, from_date: str, to_date: str) -> list[str]:
    """The periods (first local days) that ``airflow backfill create --from-date --to-date`` runs: the CLI
    parses both dates with its own argument type, and the backfill iterates the serialized DAG's runs."""
    from airflow.cli.cli_config import ARG_BACKFILL_FROM_DATE, ARG_BACKFILL_TO_DATE
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    dag = DAG("backfill_range", schedule=timetable, start_date=utc(2026, 1, 1))
    serialized = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    start = ARG_BACKFILL_FROM_DATE.kwargs["type"](from_date)
    end = ARG_BACKFILL_TO_DATE.kwargs["type"](to_date)
    tz = timetable.spec.timezone
    return [
        info.data_interval.start.in_timezone(tz).format("ddd YYYY-MM-DD")
        for info in serialized.iter_dagrun_infos_between(start, end)
    ]


def test_backfill_dates_are_utc_unless_they_carry_an_offset():
    berlin_daily = TagPeriodTimetable(interval="1d", timezone=BERLIN)
    # 2026-11-11 is read as 00:00 UTC (01:00 in Berlin): Berlin's period 2026-11-11 began before it.
    assert _backfill_periods(berlin_daily, "2026-11-11", "2026-11-12") == ["Thu 2026-11-12"]
    assert _backfill_periods(berlin_daily, "2026-11-11T00:00+01:00", "2026-11-12T00:00+01:00") == [
        "Wed 2026-11-11", "Thu 2026-11-12"
    ]


def test_seven_day_periods_start_on_thursdays():
    # 1970-01-01, day 0 of the grid, was a Thursday.
    weekly = TagPeriodTimetable(interval="7d")
    assert _backfill_periods(weekly, "2026-11-01", "2026-11-30") == [
        "Thu 2026-11-05", "Thu 2026-11-12", "Thu 2026-11-19", "Thu 2026-11-26"
    ]


def test_a_manual_run_for_a_date_covers_the_last_period_ended_by_then():
    """``airflow dags test DAG 2026-11-12`` (and ``dag.test(logical_date=...)``) gives the run the data
    interval ``infer_manual_data_interval(run_after=<that date>)``; the date is read in UTC unless it carries
    an offset."""
    from airflow.cli.cli_config import ARG_LOGICAL_DATE_OPTIONAL

    parse = ARG_LOGICAL_DATE_OPTIONAL.kwargs["type"]
    berlin_daily = TagPeriodTimetable(interval="1d", timezone=BERLIN)
    for date in ("2026-11-12", "2026-11-12T02:30+01:00"):
        interval = berlin_daily.infer_manual_data_interval(run_after=parse(date))
        assert interval == DataInterval(berlin(2026, 11, 11), berlin(2026, 11, 12)), date
    # 2026-11-11T23:30 UTC is already 00:30 on 2026-11-12 in Berlin: the period of 2026-11-11 has ended.
    assert berlin_daily.infer_manual_data_interval(run_after=parse("2026-11-11T23:30")).start == berlin(2026, 11, 11)
    assert berlin_daily.infer_manual_data_interval(run_after=parse("2026-11-11T22:30")).start == berlin(2026, 11, 10)
