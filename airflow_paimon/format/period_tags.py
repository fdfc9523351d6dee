"""The tag of one period of a table: its name, when it is due and which snapshot it goes on.

Two rules, picked by the table's options:

* this package's own (``tag.create-time`` / ``tag.create-interval``): the latest snapshot committed at or
  before the period's creation instant (period end + ``tag.create-time``), so a backfill tags exactly what a
  live run would have;
* Paimon's (``tag.automatic-creation`` = ``process-time`` or ``watermark``): the snapshot Paimon's own
  ``TagAutoCreation`` tags (the first one at or after the period's end + ``tag.creation-delay``, by commit
  time or watermark; idle periods get no tag), replayed from the table's history (``auto_tags.py``), so a
  table Flink also tags gets the same tags on the same snapshots.

``periodic_tags.choose_snapshot`` asks this module for the snapshot of a planned tag.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .auto_tags import AutoTagRule, decide_auto_tag
from .periods import Period, PeriodSpec

if TYPE_CHECKING:
    from pendulum import DateTime

    from .snapshot import Snapshot
    from .table import Table

__all__ = ["READY", "SKIPPED", "WAIT", "PeriodTagPlan", "plan_period_tag"]

READY = "ready"
WAIT = "wait"
SKIPPED = "skipped"


@dataclass(frozen=True)
class PeriodTagPlan:
    """What to do for a period's tag.

    ``status`` is ``ready`` (tag ``snapshot`` now), ``wait`` (not decided yet: the tag is not due, or under
    Paimon's rule no snapshot has decided it) or ``skipped`` (Paimon's rule makes no tag for this period).
    ``message`` says why, for logs and task failures."""

    name: str
    period: Period
    due: DateTime
    rule: str
    status: str
    snapshot: Snapshot | None
    message: str


def plan_period_tag(table: Table, spec: PeriodSpec, period: Period, now: _dt.datetime) -> PeriodTagPlan:
    """The plan for ``period``'s tag at ``now``, by the rule of ``table``'s options (``spec`` is their calendar).

    Raises ``SnapshotNotFoundError`` when the snapshot the rule asks for has expired (never a guess)."""
    name = spec.tag_name(period)
    due = spec.creation_instant(period)
    auto = AutoTagRule.from_options(table.options())
    if auto is None:
        rule = spec.describe()
        if now < due:
            return PeriodTagPlan(
                name, period, due, rule, WAIT, None,
                f"the tag {name!r} of {table.identifier} is not due until {due.isoformat()} (period end + "
                f"tag.create-time); it is {now.isoformat()}",
            )
        snapshot = table.tags.snapshot_as_of(due)
        return PeriodTagPlan(
            name, period, due, rule, READY, snapshot,
            f"snapshot {snapshot.id} is the latest committed at or before {due.isoformat()}",
        )
    rule = auto.describe()
    tag_time = _dt.datetime.combine(period.first_day, _dt.time())
    decision = decide_auto_tag(table, auto, tag_time)
    if decision.status in ("exists", "create"):
        return PeriodTagPlan(name, period, due, rule, READY, decision.snapshot, decision.message)
    if decision.status == "skipped":
        return PeriodTagPlan(name, period, due, rule, SKIPPED, None, decision.message)
    if now < due:
        message = (
            f"the tag {name!r} of {table.identifier} is not due until {due.isoformat()} (period end + "
            f"tag.creation-delay); it is {now.isoformat()}"
        )
    else:
        message = decision.message
    return PeriodTagPlan(name, period, due, rule, WAIT, None, message)
