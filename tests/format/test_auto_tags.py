"""Paimon's own automatic tags (``tag.automatic-creation``): the rule of its TagAutoCreation, replayed here.

The expected tag -> snapshot tables below are worked out by hand from Paimon's sources (paimon-core,
``org.apache.paimon.tag``):

* TagTimeExtractor: a snapshot's time is its commit time (process-time) or its watermark (watermark; a snapshot
  without one, or with Long.MIN_VALUE, is passed over), as a LocalDateTime in the zone of the mode.
* TagAutoCreation.tryToCreateTags: a snapshot makes a tag when ``nextTag == null`` or
  ``time - delay >= nextTag + period``; the tag is ``normalizeToPreviousTag(time)`` = floor(time) - period
  (``nextTag`` itself with tag.automatic-completion), and ``nextTag`` becomes that tag + period.
* BaseTagPeriodHandler.normalizeToPreviousTag: floor on the wall clock's epoch millis (periods aligned to
  1970-01-01 00:00 local).
* TagAutoCreation.tryToCreateTags, num-retained-max: after each tag made, while more snapshots than the
  maximum hold an auto tag, the auto tag of the oldest snapshot is deleted.
"""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_paimon.format.auto_tags import AutoTagRule, AutoTagState, decide_auto_tag, replay, retained_max_surplus
from airflow_paimon.format.errors import InvalidOptionError, PaimonError
from airflow_paimon.format.snapshot import Snapshot
from airflow_paimon.format.tags import Tag
from tests.e2e.tables import commit_at, create_table

UTC = dt.timezone.utc
JAVA_LONG_MIN = -(2**63)


def millis(*args: int, tz: dt.tzinfo = UTC) -> int:
    return int(dt.datetime(*args, tzinfo=tz).timestamp() * 1000)


def snapshot(snapshot_id: int, time_millis: int, watermark: int | None = None) -> Snapshot:
    return Snapshot(snapshot_id, 0, "base", "delta", "user", snapshot_id, "APPEND", time_millis, watermark=watermark)


def history(rule: AutoTagRule, snapshots: list[Snapshot]) -> dict[str, int]:
    """Every tag Paimon's writers leave on a table that was committed ``snapshots`` one at a time, with
    tag.num-retained-max applied after each tag made (as TagAutoCreation does)."""
    tags: list[Tag] = []
    for name, snap, _ in replay(rule, AutoTagState(None, snapshots[0].id), iter(snapshots)):
        tags.append(Tag(name, snap))
        doomed = {t.name for t in retained_max_surplus(rule, tags)}
        tags = [t for t in tags if t.name not in doomed]
    return {t.name: t.snapshot.id for t in tags}


# A commit history over several days (UTC): idle days, commits inside the creation delay, one a millisecond
# before a period's end + delay and one right on it.
PROCESS_TIME_HISTORY = [
    snapshot(1, millis(2026, 11, 1, 10)),
    snapshot(2, millis(2026, 11, 1, 23)),
    snapshot(3, millis(2026, 11, 2, 0, 5)),
    snapshot(4, millis(2026, 11, 2, 0, 10)),
    snapshot(5, millis(2026, 11, 2, 12)),
    # nothing on 2026-11-03 and 2026-11-04
    snapshot(6, millis(2026, 11, 5, 0, 5)),
    snapshot(7, millis(2026, 11, 5, 0, 20)),
    snapshot(8, millis(2026, 11, 6, 0, 9, 59) + 999),
    snapshot(9, millis(2026, 11, 6, 0, 10)),
]


def test_process_time_daily_with_delay_and_idle_days():
    rule = AutoTagRule.from_options(
        {"tag.automatic-creation": "process-time", "tag.creation-delay": "10 min"}
    )
    assert history(rule, PROCESS_TIME_HISTORY) == {
        # s1: nextTag == null, so the first snapshot makes a tag at once: floor(11-01 10:00) - 1d = 10-31.
        "2026-10-31": 1,
        # s2 (23:00 - 10 min < 11-02 00:00) and s3 (00:05 - 10 min < 11-02 00:00) do not; s4 (00:10 - 10 min
        # = 11-02 00:00 >= nextTag 11-01 + 1d) does: floor(11-02 00:10) - 1d = 11-01.
        "2026-11-01": 4,
        # s5: 11-02 11:50 < 11-03. Then two idle days. s6: 11-05 00:05 - 10 min = 11-04 23:55 >= 11-03, so it
        # makes floor(11-05 00:05) - 1d = 11-04 -- before 11-04's end + delay (11-05 00:10) -- and 11-02 and
        # 11-03 are never tagged.
        "2026-11-04": 6,
        # nextTag is 11-05: s7 (11-05 00:10 < 11-06) and s8 (11-05 23:59:59.999 < 11-06) do not; s9 does.
        "2026-11-05": 9,
    }


def test_num_retained_max_deletes_the_auto_tags_of_the_oldest_snapshots():
    rule = AutoTagRule.from_options(
        {"tag.automatic-creation": "process-time", "tag.creation-delay": "10 min", "tag.num-retained-max": "2"}
    )
    # After s6's tag three snapshots hold one: 10-31 (s1) goes; after s9's, 11-01 (s4).
    assert history(rule, PROCESS_TIME_HISTORY) == {"2026-11-04": 6, "2026-11-05": 9}


def test_retained_max_counts_snapshots_and_only_auto_tags():
    rule = AutoTagRule.from_options({"tag.automatic-creation": "process-time", "tag.num-retained-max": "1"})
    s = [snapshot(i, millis(2026, 11, i)) for i in range(1, 4)]
    tags = [Tag("2026-11-01", s[0]), Tag("keep-me", s[0]), Tag("2026-11-02", s[1]), Tag("2026-11-03", s[2])]
    assert [t.name for t in retained_max_surplus(rule, tags)] == ["2026-11-01", "2026-11-02"]
    with pytest.raises(PaimonError, match="more than 1 auto-created tag of snapshot 1"):
        retained_max_surplus(rule, [Tag("2026-11-01", s[0]), Tag("2026-11-02", s[0]), Tag("2026-11-03", s[2])])


def test_watermark_hourly_in_its_own_time_zone():
    rule = AutoTagRule.from_options(
        {
            "tag.automatic-creation": "watermark",
            "tag.creation-period": "hourly",
            "tag.creation-delay": "15 min",
            "tag.period-formatter": "without_dashes",
            "sink.watermark-time-zone": "Asia/Shanghai",
            "sink.process-time-zone": "America/New_York",  # not read in watermark mode
        }
    )
    late = millis(2026, 12, 1)  # commit times play no part
    shanghai = dt.timezone(dt.timedelta(hours=8))
    snapshots = [
        snapshot(1, late, None),  # no watermark: passed over
        snapshot(2, late, millis(2026, 11, 1, 10, 30, tz=shanghai)),
        snapshot(3, late, JAVA_LONG_MIN),  # Paimon's "no watermark": passed over
        snapshot(4, late, millis(2026, 11, 1, 11, 14, tz=shanghai)),
        snapshot(5, late, millis(2026, 11, 1, 11, 15, tz=shanghai)),
        snapshot(6, late, millis(2026, 11, 1, 14, 20, tz=shanghai)),
    ]
    assert history(rule, snapshots) == {
        "20261101 09": 2,  # first: floor(10:30) - 1h
        # s4: 11:14 - 15 min = 10:59 < 10:00 + 1h; s5: 11:00 >= 11:00 -> floor(11:15) - 1h = 10:00
        "20261101 10": 5,
        # 12:00 and 13:00 are idle: s6 (14:05 >= 12:00) makes floor(14:20) - 1h = 13:00
        "20261101 13": 6,
    }


def test_wall_clock_days_across_the_end_of_daylight_saving_time():
    rule = AutoTagRule.from_options(
        {"tag.automatic-creation": "process-time", "sink.process-time-zone": "Europe/Berlin"}
    )
    snapshots = [
        snapshot(1, millis(2026, 10, 24, 12)),  # 14:00 CEST -> first: 10-23
        snapshot(2, millis(2026, 10, 24, 22, 30)),  # 10-25 00:30 CEST >= 10-24 + 1d -> 10-24
        snapshot(3, millis(2026, 10, 25, 0, 30)),  # 02:30 CEST
        snapshot(4, millis(2026, 10, 25, 1, 30)),  # 02:30 CET, the same wall clock again
        snapshot(5, millis(2026, 10, 25, 22, 59, 59)),  # 23:59:59 CET, still 10-25 (a 25-hour day)
        snapshot(6, millis(2026, 10, 25, 23)),  # 10-26 00:00 CET -> 10-25
    ]
    assert history(rule, snapshots) == {"2026-10-23": 1, "2026-10-24": 2, "2026-10-25": 6}


def test_automatic_completion_fills_idle_periods_one_per_snapshot():
    rule = AutoTagRule.from_options({"tag.automatic-creation": "process-time", "tag.automatic-completion": "true"})
    snapshots = [
        snapshot(1, millis(2026, 11, 1, 10)),
        snapshot(2, millis(2026, 11, 4, 1)),
        snapshot(3, millis(2026, 11, 4, 2)),
        snapshot(4, millis(2026, 11, 4, 3)),
        snapshot(5, millis(2026, 11, 4, 4)),
    ]
    # s1 makes 10-31 (completion only applies once a tag exists); then each snapshot makes nextTag itself
    # while time >= nextTag + 1d: 11-01, 11-02, 11-03; s5 (11-04 04:00 < 11-04 + 1d) makes none.
    assert history(rule, snapshots) == {"2026-10-31": 1, "2026-11-01": 2, "2026-11-02": 3, "2026-11-03": 4}


@pytest.mark.parametrize(
    ("options", "wall", "name"),
    [
        ({"tag.creation-period": "daily"}, dt.datetime(2026, 11, 1, 10, 30), "2026-10-31"),
        ({"tag.period-formatter": "without_dashes_and_spaces"}, dt.datetime(2026, 11, 1, 10, 30), "20261031"),
        ({"tag.creation-period": "hourly"}, dt.datetime(2026, 11, 1, 0, 30), "2026-10-31 23"),
        (
            {"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes_and_spaces"},
            dt.datetime(2026, 11, 1, 10, 30),
            "2026110109",
        ),
        # two-hours ignores the formatter; periods are aligned to even hours
        (
            {"tag.creation-period": "two-hours", "tag.period-formatter": "without_dashes"},
            dt.datetime(2026, 11, 1, 11, 59),
            "2026-11-01 08",
        ),
        # a period duration wins over tag.creation-period and is named yyyyMMddHHmm
        (
            {"tag.creation-period-duration": "30 min", "tag.creation-period": "hourly"},
            dt.datetime(2026, 11, 1, 10, 40),
            "202611011000",
        ),
    ],
)
def test_periods_and_names(options, wall, name):
    rule = AutoTagRule.from_options({"tag.automatic-creation": "process-time", **options})
    tag_time = rule.previous_tag_time(wall)
    assert rule.tag_name(tag_time) == name
    assert rule.tag_time(name) == tag_time


def test_which_tags_are_auto_tags():
    daily = AutoTagRule.from_options({"tag.automatic-creation": "process-time"})
    # The daily handler parses what comes before the first space (DailyTagPeriodHandler.tagToTime).
    assert daily.is_auto_tag("2026-11-01") and daily.is_auto_tag("2026-11-01 backup")
    assert not daily.is_auto_tag("2026-02-30") and not daily.is_auto_tag("20261101") and not daily.is_auto_tag("x")
    hourly = AutoTagRule.from_options({"tag.automatic-creation": "watermark", "tag.creation-period": "hourly"})
    assert hourly.is_auto_tag("2026-11-01 23")
    assert not hourly.is_auto_tag("2026-11-01 24") and not hourly.is_auto_tag("2026-11-01")


def test_none_and_batch_modes_have_no_rule():
    assert AutoTagRule.from_options({}) is None
    assert AutoTagRule.from_options({"tag.automatic-creation": "batch"}) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tag.creation-period", "weekly"),
        ("tag.creation-delay", "1d"),  # not shorter than the daily period
        ("tag.period-formatter", "yyyy"),
        ("tag.creation-period-duration", "0 ms"),
        ("tag.num-retained-max", "0"),
        ("tag.automatic-completion", "maybe"),
        ("sink.process-time-zone", "Mars/Olympus"),
    ],
)
def test_bad_options_name_the_option_and_value(key, value):
    with pytest.raises(InvalidOptionError, match=f"'{key}': '{value}'"):
        AutoTagRule.from_options({"tag.automatic-creation": "process-time", key: value})


# ---------------------------------------------------------------------------------------------------------
# On a real table: which snapshot a period's tag goes on
# ---------------------------------------------------------------------------------------------------------


def flink_table(warehouse: str, **options: str):
    """A table Paimon auto-tags daily with a 10 minute delay, committed as PROCESS_TIME_HISTORY."""
    t = create_table(warehouse, "db.flink", {"tag.automatic-creation": "process-time",
                                             "tag.creation-delay": "10 min", **options})
    for i, snap in enumerate(PROCESS_TIME_HISTORY, start=1):
        assert commit_at(t, dt.datetime.fromtimestamp(snap.time_millis / 1000, UTC), i) == snap.id
    return t


@pytest.fixture
def table(tmp_path):
    return flink_table(str(tmp_path / "wh"))


def day(d: int) -> dt.datetime:
    return dt.datetime(2026, 11, d)


def test_decisions_replay_from_the_earliest_snapshot(table):
    rule = AutoTagRule.from_options(table.options())
    decisions = [decide_auto_tag(table, rule, day(n)) for n in (1, 2, 3, 4, 5, 6)]
    assert [(d.status, d.snapshot and d.snapshot.id) for d in decisions] == [
        ("create", 4), ("skipped", 6), ("skipped", 6), ("create", 6), ("create", 9), ("pending", None),
    ]
    assert decisions[1].instead == "2026-11-04"


def test_decisions_resume_after_the_newest_earlier_auto_tag(table):
    rule = AutoTagRule.from_options(table.options())
    # A Paimon writer that made 11-04 on snapshot 5 (say, with another delay) resumes there: next is 11-05.
    table.tags.create("2026-11-04", snapshot_id=5)
    decision = decide_auto_tag(table, rule, day(5))
    assert (decision.status, decision.snapshot.id) == ("create", 9)
    existing = decide_auto_tag(table, rule, day(4))
    assert (existing.status, existing.snapshot.id) == ("exists", 5)


def test_a_second_auto_tag_on_one_snapshot_is_refused(table):
    rule = AutoTagRule.from_options(table.options())
    # Made by hand on the snapshot where Paimon's rule puts 11-05 (TagManager.validateNoAutoTag refuses this).
    table.tags.create("2026-11-09", snapshot_id=9)
    with pytest.raises(PaimonError, match="snapshot 9, which is already auto-tagged with 2026-11-09"):
        decide_auto_tag(table, rule, day(5))


def test_expired_history_is_an_error_not_a_guess(table):
    rule = AutoTagRule.from_options(table.options())
    table.tags.create("2026-11-01", snapshot_id=4)
    table.maintenance.expire_snapshots(retain_min=2, retain_max=2)
    assert table.snapshot_manager.earliest_id() == 8
    # The replay would resume after 11-01's snapshot 4, but 5..7 are gone.
    with pytest.raises(PaimonError, match="snapshots before 8 have expired"):
        decide_auto_tag(table, rule, day(5))


def test_expire_tags_applies_paimons_retained_max(tmp_path):
    table = flink_table(str(tmp_path / "wh"), **{"tag.num-retained-max": "2"})
    # Named so that the oldest snapshot does not hold the oldest period: Paimon goes by snapshot.
    for name, snapshot_id in (("2026-11-04", 1), ("2026-10-31", 4), ("2026-11-05", 6), ("not-auto", 2)):
        table.tags.create(name, snapshot_id=snapshot_id)
    expired = table.maintenance.expire_tags()
    assert expired.tags == ["2026-11-04"]
    assert sorted(t.name for t in table.tags.list()) == ["2026-10-31", "2026-11-05", "not-auto"]


def _watermarks(*walls: str) -> list[Snapshot]:
    commit_time = millis(2030, 1, 1)  # the Java tests commit now; only the watermark counts
    return [
        snapshot(i, commit_time, int(dt.datetime.fromisoformat(w).replace(tzinfo=UTC).timestamp() * 1000))
        for i, w in enumerate(walls, start=1)
    ]


@pytest.mark.parametrize(
    ("options", "watermarks", "expected"),
    [
        # TagAutoManagerTest.testTag (without its snapshot expiry, which does not change the tags)
        (
            {"tag.creation-period": "hourly", "tag.num-retained-max": "3"},
            ["2023-07-18T12:12:00", "2023-07-18T12:59:00", "2023-07-18T13:00:00", "2023-07-18T14:00:00",
             "2023-07-18T15:00:00", "2023-07-18T15:01:00", "2023-07-18T15:02:00", "2023-07-18T15:03:00",
             "2023-07-18T15:04:00", "2023-07-18T16:00:00"],
            {"2023-07-18 13": 4, "2023-07-18 14": 5, "2023-07-18 15": 10},
        ),
        # TagAutoManagerTest.testTagDelay
        (
            {"tag.creation-period": "hourly", "tag.creation-delay": "10 s"},
            ["2023-07-18T12:00:09", "2023-07-18T13:00:09", "2023-07-18T13:00:10"],
            {"2023-07-18 11": 1, "2023-07-18 12": 3},
        ),
        # TagAutoManagerTest.testAutoCompleteTags
        (
            {"tag.creation-period": "hourly", "tag.num-retained-max": "3", "tag.automatic-completion": "true"},
            ["2024-06-26T16:12:00", "2024-06-26T18:05:00", "2024-06-26T18:10:00"],
            {"2024-06-26 15": 1, "2024-06-26 16": 2, "2024-06-26 17": 3},
        ),
    ],
)
def test_the_same_tags_as_paimons_own_tests(options, watermarks, expected):
    rule = AutoTagRule.from_options({"tag.automatic-creation": "watermark", **options})
    assert history(rule, _watermarks(*watermarks)) == expected
