"""Paimon's own automatic tags: the rule of its ``TagAutoCreation`` for ``tag.automatic-creation``.

A table with ``tag.automatic-creation`` = ``process-time`` or ``watermark`` is tagged by every Paimon writer
(Flink, Spark) right after each commit. Tags made here for such a table must be the ones Paimon makes: same
names, same snapshots. Paimon's rule differs from this package's own ``tag.create-time`` rule (``periods.py``):

* A snapshot's *time* is its commit time (``process-time``, in ``sink.process-time-zone``) or its watermark
  (``watermark``, in ``sink.watermark-time-zone``; snapshots without a watermark are passed over), as a
  local wall-clock time. All arithmetic is on wall-clock times, as Java's ``LocalDateTime``.
* Snapshots are visited in id order. A snapshot makes a tag when no tag was made yet or when
  ``time - tag.creation-delay >= next tag + one period``; the tag is named by ``floor(time) - one period``
  (periods aligned to 1970-01-01 00:00 local), so it lands on the FIRST snapshot at or after the period's
  end + delay, and after idle periods the tags of the periods without snapshots are never made
  (``tag.automatic-completion`` = true makes them one per later snapshot instead). Then ``next tag`` becomes
  the tag made plus one period.
* A writer resumes from the newest auto tag (by the time its name gives): the next snapshot is the one after
  that tag's, the next tag one period after it; with no auto tag it starts at the earliest snapshot.
* An existing tag is kept as it is (Paimon creates with ignore-if-exists).
* ``tag.num-retained-max`` counts every tag whose name the period handler can parse, and deletes those on the
  oldest snapshots first.

Periods: ``tag.creation-period`` = ``daily`` (names ``yyyy-MM-dd``, or ``yyyyMMdd`` with ``without_dashes``
and ``without_dashes_and_spaces``), ``hourly`` (``yyyy-MM-dd HH``, ``yyyyMMdd HH``, ``yyyyMMddHH``),
``two-hours`` (always ``yyyy-MM-dd HH``), or ``tag.creation-period-duration`` (any duration, names
``yyyyMMddHHmm``), which wins over ``tag.creation-period``.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import InvalidOptionError, PaimonError, SnapshotNotFoundError
from .period_options import (
    OPT_AUTOMATIC_CREATION,
    OPT_CREATION_DELAY,
    OPT_CREATION_PERIOD,
    OPT_CREATION_PERIOD_DURATION,
    OPT_DEFAULT_TIME_RETAINED,
    OPT_NUM_RETAINED_MAX,
    OPT_PERIOD_FORMATTER,
    OPT_PROCESS_TIME_ZONE,
    OPT_WATERMARK_TIME_ZONE,
    OptionReader,
)
from .period_values import parse_duration, parse_num_retained, parse_timezone, timezone_name
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .snapshot import SnapshotManager
    from .table import Table
    from .tag_file import Tag

__all__ = [
    "OPT_AUTOMATIC_COMPLETION",
    "AutoTagDecision",
    "AutoTagRule",
    "AutoTagState",
    "decide_auto_tag",
    "replay",
    "retained_max_surplus",
]

OPT_AUTOMATIC_COMPLETION = "tag.automatic-completion"

_LOCAL_EPOCH = _dt.datetime(1970, 1, 1)
_UTC = _dt.timezone.utc
_JAVA_LONG_MIN = -(2**63)  # Paimon's "no watermark" value

# Name layouts of Paimon's TagPeriodHandler formatters (strict: fixed widths, ASCII digits).
_DAY_DASHES = "yyyy-MM-dd"
_DAY = "yyyyMMdd"
_HOUR_DASHES = "yyyy-MM-dd HH"
_HOUR = "yyyyMMdd HH"
_HOUR_COMPACT = "yyyyMMddHH"
_MINUTE = "yyyyMMddHHmm"
_LAYOUTS: dict[str, tuple[str, re.Pattern[str]]] = {
    _DAY_DASHES: ("%Y-%m-%d", re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")),
    _DAY: ("%Y%m%d", re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})")),
    _HOUR_DASHES: ("%Y-%m-%d %H", re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2})")),
    _HOUR: ("%Y%m%d %H", re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2}) ([0-9]{2})")),
    _HOUR_COMPACT: ("%Y%m%d%H", re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})([0-9]{2})")),
    _MINUTE: ("%Y%m%d%H%M", re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})")),
}
_PERIODS = {"daily": _dt.timedelta(days=1), "hourly": _dt.timedelta(hours=1), "two-hours": _dt.timedelta(hours=2)}
_FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")


def _layout(period: str, formatter: str) -> str:
    if period == "daily":
        return _DAY_DASHES if formatter == "with_dashes" else _DAY
    if period == "hourly":
        return {"with_dashes": _HOUR_DASHES, "without_dashes": _HOUR}.get(formatter, _HOUR_COMPACT)
    if period == "two-hours":
        return _HOUR_DASHES  # Paimon's two-hours handler ignores tag.period-formatter
    return _MINUTE  # tag.creation-period-duration


def _millis(value: _dt.timedelta) -> int:
    return value // _dt.timedelta(milliseconds=1)


def _java_div(a: int, b: int) -> int:
    """Java's long division: truncates toward zero (so wall times before 1970 round up, as in Paimon)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@dataclass(frozen=True)
class AutoTagRule:
    """A table's ``tag.automatic-creation`` settings, for the ``process-time`` and ``watermark`` modes."""

    mode: str
    period_name: str  # daily, hourly, two-hours, or the duration of tag.creation-period-duration
    period: _dt.timedelta
    layout: str
    delay: _dt.timedelta
    timezone: _dt.tzinfo
    num_retained_max: int | None = None
    default_time_retained: _dt.timedelta | None = None
    automatic_completion: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> AutoTagRule | None:
        """The rule of a table's options, or ``None`` when Paimon does not tag it by time (``none``, ``batch``).

        Invalid values raise :class:`InvalidOptionError` naming the option and the value."""
        opts = {str(k): str(v) for k, v in options.items() if v is not None}
        mode = opts.get(OPT_AUTOMATIC_CREATION, "none").strip().lower()
        if mode not in ("process-time", "watermark"):
            return None

        def bad(key: str, why: str) -> InvalidOptionError:
            return InvalidOptionError(f"invalid value for table option '{key}': {opts.get(key)!r}: {why}")

        read = OptionReader(opts).read

        formatter = opts.get(OPT_PERIOD_FORMATTER, "with_dashes").strip().lower()
        if formatter not in _FORMATTERS:
            raise bad(OPT_PERIOD_FORMATTER, f"expected one of {', '.join(_FORMATTERS)}")
        custom = read(OPT_CREATION_PERIOD_DURATION, parse_duration)
        if custom is not None:
            if custom <= _dt.timedelta(0) or custom % _dt.timedelta(milliseconds=1):
                raise bad(OPT_CREATION_PERIOD_DURATION, "the period must be a positive whole number of milliseconds")
            period_name, period = f"{_millis(custom)} ms", custom
        else:
            period_name = opts.get(OPT_CREATION_PERIOD, "daily").strip().lower()
            if period_name not in _PERIODS:
                raise bad(OPT_CREATION_PERIOD, f"expected one of {', '.join(_PERIODS)}")
            period = _PERIODS[period_name]
        delay = read(OPT_CREATION_DELAY, parse_duration) or _dt.timedelta(0)
        if delay >= period:
            # TagPeriodHandler.validateDelay: one period must be longer than the delay.
            raise bad(OPT_CREATION_DELAY, f"the delay must be shorter than one period ({period})")
        zone_key = OPT_WATERMARK_TIME_ZONE if mode == "watermark" else OPT_PROCESS_TIME_ZONE
        zone = read(zone_key, parse_timezone) or parse_timezone(None)
        retained_max = read(OPT_NUM_RETAINED_MAX, parse_num_retained)
        retained = read(OPT_DEFAULT_TIME_RETAINED, parse_duration)
        completion = opts.get(OPT_AUTOMATIC_COMPLETION, "false").strip().lower()
        if completion not in ("true", "false"):
            raise bad(OPT_AUTOMATIC_COMPLETION, "expected true or false")
        return cls(
            mode=mode,
            period_name=period_name,
            period=period,
            layout=_layout("custom" if custom is not None else period_name, formatter),
            delay=delay,
            timezone=zone,
            num_retained_max=retained_max,
            default_time_retained=retained,
            automatic_completion=completion == "true",
        )

    # -- TagTimeExtractor -----------------------------------------------------------------------------

    def snapshot_time(self, snapshot: Snapshot) -> _dt.datetime | None:
        """The snapshot's wall-clock time for the rule, or ``None`` (watermark mode, snapshot without one)."""
        if self.mode == "watermark":
            millis = snapshot.watermark
            if millis is None or millis == _JAVA_LONG_MIN:
                return None
        else:
            millis = snapshot.time_millis
        instant = _dt.datetime(1970, 1, 1, tzinfo=_UTC) + _dt.timedelta(milliseconds=millis)
        return instant.astimezone(self.timezone).replace(tzinfo=None)

    # -- TagPeriodHandler -----------------------------------------------------------------------------

    def period_start(self, wall: _dt.datetime) -> _dt.datetime:
        """The start of the period holding the wall-clock time ``wall`` (epoch-aligned in wall-clock millis)."""
        period = _millis(self.period)
        return _LOCAL_EPOCH + _dt.timedelta(milliseconds=_java_div(_millis(wall - _LOCAL_EPOCH), period) * period)

    def previous_tag_time(self, wall: _dt.datetime) -> _dt.datetime:
        """``normalizeToPreviousTag``: the period before the one holding ``wall``."""
        return self.period_start(wall) - self.period

    def tag_name(self, tag_time: _dt.datetime) -> str:
        return tag_time.strftime(_LAYOUTS[self.layout][0])

    def tag_time(self, name: str) -> _dt.datetime | None:
        """The period start a tag name stands for, or ``None`` when the name is not an auto tag's."""
        if not isinstance(name, str):
            return None
        if self.layout in (_DAY_DASHES, _DAY):
            name = name.split(" ")[0]  # the daily handler reads only what comes before the first space
        match = _LAYOUTS[self.layout][1].fullmatch(name)
        if not match:
            return None
        year, month, day, hour, minute = [int(g) for g in match.groups()] + [0] * (5 - len(match.groups()))
        try:
            return _dt.datetime(year, month, day, hour, minute)
        except ValueError:
            return None

    def is_auto_tag(self, name: str) -> bool:
        return self.tag_time(name) is not None

    def describe(self) -> str:
        time = "commit time" if self.mode == "process-time" else "watermark"
        return (
            f"Paimon's {self.mode} auto tags: one per {self.period_name} period, on the first snapshot whose "
            f"{time} ({timezone_name(self.timezone)}) is at or after the period's end + {self.delay}, "
            f"named {self.layout}"
        )


@dataclass(frozen=True)
class AutoTagState:
    """Where Paimon's tag creation stands: the next tag's period start and the next snapshot to look at."""

    next_tag: _dt.datetime | None
    next_snapshot: int


def _auto_tags(rule: AutoTagRule, tags: list[Tag]) -> list[tuple[_dt.datetime, Tag]]:
    return sorted(
        ((t, tag) for tag in tags if (t := rule.tag_time(tag.name)) is not None),
        key=lambda pair: (pair[0], pair[1].snapshot.id),
    )


def _state_after(rule: AutoTagRule, anchor: Tag | None, earliest: int | None) -> AutoTagState:
    """TagAutoCreation's constructor: resume after the auto tag ``anchor``, or start at the earliest snapshot."""
    if anchor is None:
        return AutoTagState(None, earliest if earliest is not None else 1)
    anchor_time = rule.tag_time(anchor.name)
    if anchor_time is None:  # only auto tags are anchors (see _auto_tags)
        raise ValueError(f"{anchor.name!r} is not an auto tag of {rule.describe()}")
    return AutoTagState(anchor_time + rule.period, anchor.snapshot.id + 1)


def replay(
    rule: AutoTagRule, state: AutoTagState, snapshots: Iterator[Snapshot]
) -> Iterator[tuple[str, Snapshot, AutoTagState]]:
    """``TagAutoCreation.tryToCreateTags`` over ``snapshots`` (ids from ``state.next_snapshot`` on, in order):
    yields each tag Paimon makes, the snapshot it goes on and the state after it."""
    next_tag = state.next_tag
    for snapshot in snapshots:
        if snapshot.id < state.next_snapshot:
            continue
        time = rule.snapshot_time(snapshot)
        if time is None:
            continue
        if next_tag is not None and time - rule.delay < next_tag + rule.period:
            continue
        this_tag = rule.previous_tag_time(time)
        if rule.automatic_completion and next_tag is not None:
            this_tag = next_tag
        next_tag = this_tag + rule.period
        yield rule.tag_name(this_tag), snapshot, AutoTagState(next_tag, snapshot.id + 1)


@dataclass(frozen=True)
class AutoTagDecision:
    """What Paimon's rule does with the period starting at ``tag_time``.

    ``status``: ``exists`` (the tag is there: kept as it is), ``create`` (on ``snapshot``), ``skipped``
    (Paimon made ``instead`` on ``snapshot`` and never makes this one) or ``pending`` (no snapshot has
    decided it yet)."""

    name: str
    status: str
    snapshot: Snapshot | None
    instead: str | None
    message: str


def _snapshots_from(sm: SnapshotManager, first: int, latest: int | None) -> Iterator[Snapshot]:
    """Snapshots ``first..latest`` in order, stopping at a missing one (as ``TagAutoCreation.run`` does)."""
    for snapshot_id in range(first, (latest or 0) + 1):
        try:
            yield sm.snapshot(snapshot_id)
        except (SnapshotNotFoundError, FileNotFoundError):
            return


def decide_auto_tag(table: Table, rule: AutoTagRule, tag_time: _dt.datetime) -> AutoTagDecision:
    """Paimon's tag for the period starting at ``tag_time`` (wall clock), replayed from the table's history.

    The replay resumes, as a Paimon writer would, after the newest auto tag of an earlier period (or at the
    earliest snapshot when there is none). When snapshots it needs have expired, the answer is unknown and
    ``SnapshotNotFoundError`` is raised rather than a guess."""
    name = rule.tag_name(tag_time)
    tags = table.tags.list()
    existing = next((t for t in tags if t.name == name), None)
    if existing is not None:
        return AutoTagDecision(name, "exists", existing.snapshot, None, f"tag {name!r} exists (Paimon keeps it)")
    earlier = [tag for t, tag in _auto_tags(rule, tags) if t < tag_time]
    anchor = earlier[-1] if earlier else None
    sm = table.snapshot_manager
    earliest, latest = sm.earliest_id(), sm.latest_id()
    state = _state_after(rule, anchor, earliest)
    if anchor is not None and earliest is not None and earliest > state.next_snapshot:
        raise SnapshotNotFoundError(
            f"cannot tell which snapshot Paimon's auto tag {name!r} of {table.identifier} goes on: the replay "
            f"starts after tag {anchor.name!r} (snapshot {anchor.snapshot.id}) but snapshots before {earliest} "
            "have expired"
        )
    for made, snapshot, _ in replay(rule, state, _snapshots_from(sm, state.next_snapshot, latest)):
        made_time = rule.tag_time(made)
        if made == name:
            held = sorted(t.name for t in tags if t.snapshot.id == snapshot.id and rule.is_auto_tag(t.name))
            if held:
                # Paimon's TagManager refuses a second auto tag on one snapshot (validateNoAutoTag).
                raise PaimonError(
                    f"Paimon's rule puts auto tag {name!r} of {table.identifier} on snapshot {snapshot.id}, which "
                    f"is already auto-tagged with {', '.join(held)}; the table's auto tags were not all made by "
                    "this rule (options changed, or tags made by hand): delete or rename the odd one"
                )
            return AutoTagDecision(name, "create", snapshot, None, f"Paimon tags snapshot {snapshot.id} {name!r}")
        if made_time is not None and made_time > tag_time:
            return AutoTagDecision(
                name, "skipped", snapshot, made,
                f"Paimon makes no tag {name!r}: the first snapshot after it (snapshot {snapshot.id}) makes "
                f"{made!r} instead (periods without snapshots are skipped)",
            )
    due = tag_time + rule.period + rule.delay
    time = "committed" if rule.mode == "process-time" else "with a watermark"
    return AutoTagDecision(
        name, "pending", None, None,
        f"no snapshot of {table.identifier} {time} at or after {due.isoformat(sep=' ')} "
        f"({timezone_name(rule.timezone)}) yet, so Paimon's auto tag {name!r} is not made yet",
    )


def retained_max_surplus(rule: AutoTagRule, tags: list[Tag]) -> list[Tag]:
    """The auto tags ``tag.num-retained-max`` deletes, as ``TagAutoCreation`` does: auto tags are grouped by
    snapshot, and while more snapshots than the maximum hold one, the tag of the oldest goes (a snapshot with
    two auto tags is an error there, and here)."""
    if rule.num_retained_max is None:
        return []
    by_snapshot: dict[int, list[Tag]] = {}
    for tag in tags:
        if rule.is_auto_tag(tag.name):
            by_snapshot.setdefault(tag.snapshot.id, []).append(tag)
    surplus = len(by_snapshot) - rule.num_retained_max
    victims: list[Tag] = []
    for snapshot_id in sorted(by_snapshot)[: max(surplus, 0)]:
        group = by_snapshot[snapshot_id]
        if len(group) > 1:
            names = ", ".join(sorted(t.name for t in group))
            raise PaimonError(
                f"there is more than 1 auto-created tag of snapshot {snapshot_id} ({names}); delete all but one "
                "before tag.num-retained-max expires tags"
            )
        victims.append(group[0])
    return victims
