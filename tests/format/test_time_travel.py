"""Time travel and rollback by time after expiry: exact when a tag and its successor prove which snapshot was
current, otherwise an error naming the closest tag (or, asked for explicitly, that tag, and the result says so).
A rollback never removes a commit the caller did not name, and a tag is never taken for a time."""

from __future__ import annotations

import datetime as dt
import types

import pytest

from airflow_paimon.format import InvalidOptionError, SnapshotExpiredError, SnapshotNotFoundError, TagNotFoundError
from airflow_paimon.format import commit as commit_module

from .upkeep_helpers import FUTURE, make_table, rows, tree_digest, upsert

T0 = 1_790_000_000_000  # 2026-09-21: snapshot n is committed at T0 + n minutes


def at(millis: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc)


def commit_time(n: int) -> int:
    return T0 + n * 60_000


@pytest.fixture
def clock(monkeypatch):
    """Commits stamped one minute apart (snapshot times a test can name), without waiting."""
    state = {"now": T0}

    def now() -> float:
        state["now"] += 60_000
        return state["now"] / 1000

    monkeypatch.setattr(commit_module, "time", types.SimpleNamespace(time=now, sleep=lambda s: None))
    return state


@pytest.fixture
def expired(tmp_path, clock):
    """Snapshots 1..10 (snapshot n adds key n), tag "five" on 5; snapshots 1..8 expired."""
    t = make_table(tmp_path)
    for n in range(1, 11):
        upsert(t, [n], n)
        if n == 5:
            t.tags.create("five")
    assert [t.snapshot(n).time_millis for n in (9, 10)] == [commit_time(9), commit_time(10)]
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    assert t.snapshot_manager.ids() == [9, 10]
    return t


def keys(data) -> list[int]:
    return sorted(data["id"].to_pylist())


# ---- rollback -----------------------------------------------------------------------------------------

def test_rollback_to_the_time_of_an_expired_snapshot_is_refused_not_rolled_back_further(expired):
    before = tree_digest(expired.path)
    with pytest.raises(SnapshotExpiredError) as e:
        expired.maintenance.rollback(to_time=at(commit_time(8)), now=FUTURE)
    message = str(e.value)
    assert "'five'" in message and "snapshot 5" in message and "retained snapshots 9..10" in message
    assert "to_tag" in message
    assert tree_digest(expired.path) == before
    assert keys(expired.read()) == list(range(1, 11))


def test_rollback_to_a_time_a_tag_provably_holds(expired, clock):
    t = expired
    upsert(t, [11], 11)                                  # 11
    t.tags.create("eleven")
    upsert(t, [12], 12)                                  # 12
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert t.snapshot_manager.ids() == [12]
    # snapshot 11 is tagged, snapshot 12 (retained) was committed after the time: 11 was current then
    result = t.maintenance.rollback(to_time=at(commit_time(11) + 30_000), now=FUTURE)
    assert result.rolled_back_to == 11 and result.restored_snapshot == 11 and result.snapshots == [12]
    assert keys(t.read()) == list(range(1, 12))


def test_rollback_to_a_retained_time_is_exact(expired):
    result = expired.maintenance.rollback(to_time=at(commit_time(9) + 59_999), now=FUTURE)
    assert result.rolled_back_to == 9 and result.snapshots == [10]


def test_rollback_to_a_future_time_is_an_error(expired):
    before = tree_digest(expired.path)
    with pytest.raises(InvalidOptionError, match="in the future"):
        expired.maintenance.rollback(to_time=at(commit_time(30)), now=at(commit_time(20)))
    with pytest.raises(InvalidOptionError, match="in the future"):
        expired.maintenance.rollback(to_time="2999-01-01")
    assert tree_digest(expired.path) == before


def test_a_date_named_tag_that_is_gone_is_an_error_not_a_time(tmp_path, clock):
    t = make_table(tmp_path)
    for n in range(1, 5):
        upsert(t, [n], n)
    t.tags.create("2026-10-25", snapshot_id=3)
    before = tree_digest(t.path)
    assert t.maintenance.rollback(to_tag="2026-10-25", dry_run=True).snapshots == [4]
    t.maintenance.delete_tag("2026-10-25")
    before = tree_digest(t.path)
    with pytest.raises(TagNotFoundError, match="tag '2026-10-25' does not exist"):
        t.maintenance.rollback(to_tag="2026-10-25")
    assert tree_digest(t.path) == before


@pytest.mark.parametrize("kwargs, error", [
    ({}, "exactly one"),
    ({"to_tag": "a", "to_snapshot": 1}, "exactly one"),
    ({"to_snapshot": "three"}, "to_snapshot: expected a whole number, not 'three'"),
    ({"to_snapshot": 0}, "at least 1"),
    ({"to_snapshot": True}, "to_snapshot: expected a whole number, not True"),
    ({"to_time": "yesterday"}, "to_time: 'yesterday' is not a point in time"),
    ({"to_time": ""}, "to_time must be a point in time"),
    ({"to_tag": ""}, "to_tag must be a tag name"),
    ({"to_tag": ["five"]}, "to_tag must be a tag name"),
])
def test_bad_rollback_arguments_name_the_argument_and_change_nothing(expired, kwargs, error):
    before = tree_digest(expired.path)
    with pytest.raises(InvalidOptionError, match=error):
        expired.maintenance.rollback(**kwargs)
    assert tree_digest(expired.path) == before


def test_rollback_to_a_time_before_the_first_commit_says_so(tmp_path, clock):
    t = make_table(tmp_path)
    upsert(t, [1], 1)
    upsert(t, [2], 2)
    with pytest.raises(SnapshotNotFoundError) as e:
        t.maintenance.rollback(to_time=at(T0), now=FUTURE)
    assert "first commit (snapshot 1)" in str(e.value) and "expired" not in str(e.value)


def test_time_before_expired_history_without_tags_says_expired(tmp_path, clock):
    t = make_table(tmp_path)
    for n in range(1, 5):
        upsert(t, [n], n)
    t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE, max_deletes=100)
    with pytest.raises(SnapshotExpiredError, match="have expired: the oldest known is snapshot 3"):
        t.maintenance.rollback(to_time=at(commit_time(1)), now=FUTURE)


# ---- time travel --------------------------------------------------------------------------------------

def test_reading_at_the_time_of_an_expired_snapshot_is_an_error_naming_the_closest_tag(expired):
    with pytest.raises(SnapshotExpiredError) as e:
        expired.read(as_of=at(commit_time(8)))
    assert "closest tag is 'five'" in str(e.value) and "closest_tag=True" in str(e.value)
    with pytest.raises(SnapshotExpiredError):
        expired.resolve_snapshot(as_of=at(commit_time(8)))


def test_the_closest_tag_when_asked_for_and_the_result_says_so(expired):
    data = expired.read(as_of=at(commit_time(8)), closest_tag=True)
    assert keys(data) == [1, 2, 3, 4, 5]
    meta = data.schema.metadata
    assert meta[b"paimon.time-travel"] == b"closest-tag" and meta[b"paimon.tag"] == b"five"
    assert meta[b"paimon.snapshot-id"] == b"5"
    travel = expired.time_travel(at(commit_time(8)), closest_tag=True)
    assert not travel.exact and travel.tag == "five" and "closest tag" in travel.describe()


def test_exact_reads_through_a_tag_and_through_retained_snapshots(expired):
    t = expired
    t.tags.create("nine", snapshot_id=9)
    # the tag "five" holds snapshot 5; snapshot 6 is unknown, so between 5 and 6 nothing is provable ...
    with pytest.raises(SnapshotExpiredError):
        t.read(as_of=at(commit_time(5) + 1))
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert t.snapshot_manager.ids() == [10]
    # ... but tag "nine" (snapshot 9) and retained snapshot 10 bracket any time in between
    data = t.read(as_of=at(commit_time(9) + 59_999))
    assert keys(data) == list(range(1, 10)) and data.schema.metadata[b"paimon.time-travel"] == b"exact"
    assert data.schema.metadata[b"paimon.tag"] == b"nine"
    assert keys(t.read(as_of=at(commit_time(10)))) == list(range(1, 11))
    # the tag path is exact only up to the next commit: at snapshot 10's time, snapshot 10 is the answer
    assert t.time_travel(at(commit_time(10))).snapshot.id == 10


def test_tag_creation_by_time_agrees_with_time_travel(expired):
    with pytest.raises(SnapshotExpiredError, match="closest tag is 'five'"):
        expired.tags.create("eight", as_of=at(commit_time(8)))


def test_reading_before_the_first_commit(tmp_path, clock):
    t = make_table(tmp_path)
    upsert(t, [1], 1)
    with pytest.raises(SnapshotNotFoundError, match="first commit"):
        t.read(as_of=at(T0))
    with pytest.raises(InvalidOptionError, match="'soon' is not a point in time"):
        t.read(as_of="soon")
    assert rows(t.read(as_of=at(commit_time(1)))) == [(1, "a", 1)]


def test_a_paimon_changelog_file_proves_the_next_commit_time(tmp_path, clock):
    """Paimon keeps `changelog/changelog-<id>` (snapshot-shaped JSON) after the snapshot expired: its time is
    as good as the snapshot's for proving that nothing was committed between a tag and the time asked for."""
    t = make_table(tmp_path)
    for n in range(1, 5):
        upsert(t, [n], n)
    t.tags.create("two", snapshot_id=2)
    third = (tmp_path / "db.db" / "t" / "snapshot" / "snapshot-3").read_text()
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert t.snapshot_manager.ids() == [4]
    with pytest.raises(SnapshotExpiredError):
        t.time_travel(at(commit_time(2) + 1))
    (tmp_path / "db.db" / "t" / "changelog").mkdir()
    (tmp_path / "db.db" / "t" / "changelog" / "changelog-3").write_text(third)
    travel = t.time_travel(at(commit_time(2) + 1))
    assert travel.exact and travel.tag == "two" and travel.snapshot.id == 2
