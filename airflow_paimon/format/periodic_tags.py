"""Periodic tags as one use case: plan the tag of a run's period, then apply it.

* :func:`plan` reads a table's tag options and answers, for a scheduler run (its data interval, logical date or
  ``run_after``) or a plain instant: which period, which tag name, when the tag is due and whether it is due at
  ``now``. It reads only the table's options, so sensors and triggers can ask it again and again.
* :func:`choose_snapshot` picks the snapshot the tag of a planned period goes on (this package's rule or
  Paimon's ``TagAutoCreation`` rule, see ``period_tags.py``), or says to wait, or to skip the period.
* :func:`apply` creates a tag idempotently and says what happened (``created``, ``unchanged`` or ``replaced``)
  and which tags the table's tag retention then expired.

Every caller (operators, sensors, triggers, the timetable and the command line) goes through these, so the
rules live here once. ``now`` comes from the caller or from the one clock, ``airflow_paimon.clock``, which
tests freeze. No Airflow, no Spark.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pendulum

from .. import clock
from .errors import TagAlreadyExistsError, TagNotFoundError
from .period_tags import PeriodTagPlan, plan_period_tag
from .periods import Period, PeriodSpec

if TYPE_CHECKING:
    from pendulum import DateTime

    from .table import Table
    from .tag_file import Tag

__all__ = [
    "IF_EXISTS_MODES",
    "RUN_TIME_KEYS",
    "AppliedTag",
    "RunTimes",
    "TagPlan",
    "apply",
    "choose_snapshot",
    "data_snapshot",
    "iso_utc",
    "latest_due_period",
    "period_of_run",
    "plan",
]

RUN_TIME_KEYS = ("data_interval_start", "data_interval_end", "logical_date", "run_after")
"""The instants of a scheduler run that decide which period it tags."""

IF_EXISTS_MODES = ("verify", "replace", "fail")
"""What :func:`apply` does with a tag that already exists: keep it when it is on the same snapshot and refuse
otherwise (``verify``), point it at the new snapshot (``replace``), or always refuse (``fail``)."""


def iso_utc(value: _dt.datetime | None) -> str | None:
    """An instant as the ISO text in UTC that results, XComs and trigger arguments carry."""
    if value is None:
        return None
    return pendulum.instance(value).in_timezone("UTC").isoformat()


@dataclass(frozen=True)
class RunTimes:
    """The instants of a scheduler run that decide its period (any may be missing; all timezone-aware)."""

    data_interval_start: _dt.datetime | None = None
    data_interval_end: _dt.datetime | None = None
    logical_date: _dt.datetime | None = None
    run_after: _dt.datetime | None = None

    @classmethod
    def from_iso(cls, values: Mapping[str, str | None]) -> RunTimes:
        """Read back :meth:`to_iso` (what a trigger carries across the triggerer's storage)."""
        parsed: dict[str, _dt.datetime | None] = {}
        for key in RUN_TIME_KEYS:
            text = values.get(key)
            value = pendulum.parse(text) if text else None
            if value is not None and not isinstance(value, _dt.datetime):
                raise ValueError(f"{key} must be a point in time, not {text!r}")
            parsed[key] = value
        return cls(**parsed)

    def to_iso(self) -> dict[str, str | None]:
        return {key: iso_utc(getattr(self, key)) for key in RUN_TIME_KEYS}


def period_of_run(
    spec: PeriodSpec,
    data_interval_start: _dt.datetime | None = None,
    data_interval_end: _dt.datetime | None = None,
    logical_date: _dt.datetime | None = None,
    run_after: _dt.datetime | None = None,
) -> Period:
    """The period a scheduler run tags.

    A non-empty data interval must be one period of ``spec`` (``PeriodMismatchError`` otherwise) and is about
    it. An empty one (``start == end``, as cron schedules give in Airflow 3) is about the last whole period
    ending at or before it. A run without a data interval (a manual run may have none) is about the last whole
    period ending at or before its logical date, or its ``run_after`` when it has no logical date either.
    """
    if data_interval_start is not None and data_interval_end is not None:
        return spec.period_for_interval(data_interval_start, data_interval_end)
    reference = logical_date if logical_date is not None else run_after
    if reference is None:
        reference = data_interval_end if data_interval_end is not None else data_interval_start
    if reference is None:
        raise ValueError("the run has no data interval, logical date or run_after to find its period from")
    return spec.last_period_ending_at_or_before(reference)


def latest_due_period(spec: PeriodSpec, now: _dt.datetime | None = None) -> Period:
    """The newest period whose tag is due at ``now`` (default: the clock)."""
    return spec.last_period_created_at_or_before(clock.utcnow() if now is None else now)


@dataclass(frozen=True)
class TagPlan:
    """The tag of one period of a table, and whether it is due at ``now``."""

    table: str
    spec: PeriodSpec
    period: Period
    name: str
    due: DateTime
    now: DateTime

    @property
    def is_due(self) -> bool:
        return self.now >= self.due

    def at(self, now: _dt.datetime | None = None) -> TagPlan:
        """The same plan seen at ``now`` (default: the clock): a waiting sensor re-reads the time, not the table."""
        return replace(self, now=pendulum.instance(clock.utcnow() if now is None else now))

    def to_dict(self) -> dict[str, str]:
        """``{"table", "tag", "period_start", "period_end", "due"}`` with ISO times in UTC."""
        return {
            "table": self.table,
            "tag": self.name,
            "period_start": pendulum.instance(self.period.start).in_timezone("UTC").isoformat(),
            "period_end": pendulum.instance(self.period.end).in_timezone("UTC").isoformat(),
            "due": self.due.in_timezone("UTC").isoformat(),
        }


def plan(table: Table, run: RunTimes | _dt.datetime, now: _dt.datetime | None = None) -> TagPlan:
    """The tag of ``run``'s period of ``table``: a scheduler run's :class:`RunTimes`, or an instant (then the
    last whole period ending at or before it). ``now`` defaults to the clock.

    Raises ``InvalidOptionError`` for bad tag options and ``PeriodMismatchError`` when a run's data interval is
    not one period of the table's calendar."""
    spec = PeriodSpec.from_options(table.options())
    times = run if isinstance(run, RunTimes) else RunTimes(logical_date=run)
    period = period_of_run(spec, times.data_interval_start, times.data_interval_end, times.logical_date,
                           times.run_after)
    moment = pendulum.instance(clock.utcnow() if now is None else now)
    return TagPlan(table.identifier, spec, period, spec.tag_name(period), spec.creation_instant(period), moment)


def choose_snapshot(table: Table, tag_plan: TagPlan) -> PeriodTagPlan:
    """Which snapshot the planned tag goes on at the plan's ``now``: ``ready`` (with the snapshot), ``wait`` or
    ``skipped`` (Paimon's rule makes no tag for an idle period). Raises ``SnapshotNotFoundError`` when that
    snapshot has expired, never a guess."""
    return plan_period_tag(table, tag_plan.spec, tag_plan.period, tag_plan.now)


def data_snapshot(table: Table, period_end: _dt.datetime) -> int | None:
    """The id of the table's latest snapshot when it was committed at or after ``period_end``, else None.

    A snapshot that late means the writers have moved past the period, so its data is complete: sensors that wait
    for the data as well as for the due instant ask this."""
    latest = table.latest_snapshot()
    if latest is None or latest.time_millis < int(period_end.timestamp() * 1000):
        return None
    return latest.id


@dataclass(frozen=True)
class AppliedTag:
    """What :func:`apply` did: the tag as it now is, the tag it found (if any) and the tags expired after it."""

    table: str
    tag: Tag
    previous: Tag | None
    expired: tuple[str, ...] = ()
    expiry_summary: str | None = None

    @property
    def status(self) -> str:
        """``created``, ``unchanged`` (already on the same snapshot) or ``replaced`` (moved to another one)."""
        if self.previous is None:
            return "created"
        return "unchanged" if self.previous.snapshot.id == self.tag.snapshot.id else "replaced"

    @property
    def rewritten(self) -> bool:
        """Whether the tag file was written: a new tag, another snapshot, or a new retention on the same one."""
        previous = self.previous
        return previous is None or previous.snapshot.id != self.tag.snapshot.id or \
            previous.create_time != self.tag.create_time

    @property
    def snapshot_time(self) -> str:
        """When the tagged snapshot was committed (ISO, UTC)."""
        return pendulum.from_timestamp(self.tag.snapshot.time_millis / 1000, tz="UTC").isoformat()


def apply(
    table: Table,
    name: str,
    *,
    snapshot_id: int | None = None,
    as_of: object = None,
    time_retained: _dt.timedelta | str | None = None,
    if_exists: str = "verify",
    expire_tags: bool = False,
) -> AppliedTag:
    """Create the tag ``name`` on ``snapshot_id``, on the latest snapshot at or before ``as_of``, or on the latest
    snapshot; then, with ``expire_tags``, expire the tags the table's retention (``tag.num-retained-max``,
    ``tag.default-time-retained``) no longer keeps.

    ``if_exists`` is one of :data:`IF_EXISTS_MODES`. A refused tag raises ``TagAlreadyExistsError`` and changes
    nothing; so does a bad name, snapshot or retention (their own errors)."""
    if if_exists not in IF_EXISTS_MODES:
        raise ValueError(f"if_exists must be one of {', '.join(IF_EXISTS_MODES)}, not {if_exists!r}")
    tags = table.tags
    tags.check_new_name(name)
    try:
        previous: Tag | None = tags.get(name)
    except TagNotFoundError:
        previous = None
    if previous is not None and if_exists == "fail":
        raise TagAlreadyExistsError(
            f"tag {name!r} of {table.identifier} already exists (on snapshot {previous.snapshot.id}) "
            f"and if_exists='fail'"
        )
    tag = tags.create(name, snapshot_id=snapshot_id, as_of=as_of, time_retained=time_retained,
                      replace=if_exists == "replace")
    if not expire_tags:
        return AppliedTag(table.identifier, tag, previous)
    cleanup = table.maintenance.expire_tags()
    expired = tuple(cleanup.tags)
    return AppliedTag(table.identifier, tag, previous, expired, cleanup.summary() if expired else None)
