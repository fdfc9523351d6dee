"""Which snapshots expiry keeps: one validated value, read from a table's options plus a caller's overrides.

Paimon's options and defaults (``CoreOptions``): ``snapshot.num-retained.min`` (10, at least 1),
``snapshot.num-retained.max`` (``Integer.MAX_VALUE``, not below the minimum), ``snapshot.time-retained``
(1 h) and ``snapshot.expire.limit`` (50). Paimon's expire procedure overrides them with its arguments
(``retain_min``, ``retain_max``, ``older_than``, ``max_deletes``); so do the library's ``expire_snapshots``,
``ExpireSnapshotsOperator`` and the command line's ``expire-snapshots``, all through this value. Beyond Paimon,
``older_than`` may also be a duration (``'7d'``), meaning that long before now.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import InvalidValueError
from ..values import age_or_instant, count, duration, epoch_millis

__all__ = ["ExpirePolicy"]

RETAIN_MIN, RETAIN_MAX = "snapshot.num-retained.min", "snapshot.num-retained.max"
TIME_RETAINED, EXPIRE_LIMIT = "snapshot.time-retained", "snapshot.expire.limit"
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ExpirePolicy:
    """Keep at least ``retain_min`` and at most ``retain_max`` snapshots; expire at most ``max_deletes`` in one
    run; a snapshot may go once its successor was committed before ``older_than`` (a point in time), or, without
    one, more than ``time_retained`` before now."""

    retain_min: int = 10
    retain_max: int = _INT_MAX
    time_retained: dt.timedelta = dt.timedelta(hours=1)
    max_deletes: int = 50
    older_than: dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.retain_max < self.retain_min:
            raise InvalidValueError(
                f"retain_min and retain_max: retain_min={self.retain_min} is above retain_max={self.retain_max}; "
                "keep at least as many snapshots as at most")

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, retain_min: Any = None, retain_max: Any = None,
                     older_than: Any = None, max_deletes: Any = None) -> ExpirePolicy:
        """The table's options (as Paimon reads them: whole numbers, a Paimon duration), then the overrides
        given (not None): whole numbers >= 1, ``older_than`` a duration before now or a point in time."""
        def option(key: str, default: Any) -> Any:
            raw = options.get(key)
            return default if raw is None else str(raw).strip()

        rmin, rmax = count(option(RETAIN_MIN, 10), RETAIN_MIN), count(option(RETAIN_MAX, _INT_MAX), RETAIN_MAX)
        if rmax < rmin:
            raise InvalidValueError(f"{RETAIN_MAX}: {rmax} is below {RETAIN_MIN} {rmin}")
        base = cls(retain_min=rmin, retain_max=rmax,
                   time_retained=duration(option(TIME_RETAINED, "1 h"), TIME_RETAINED),
                   max_deletes=count(option(EXPIRE_LIMIT, 50), EXPIRE_LIMIT))
        return base.override(retain_min=retain_min, retain_max=retain_max, older_than=older_than,
                             max_deletes=max_deletes)

    def override(self, *, retain_min: Any = None, retain_max: Any = None, older_than: Any = None,
                 max_deletes: Any = None) -> ExpirePolicy:
        """This policy with the given (not None) arguments in place of its limits, each checked."""
        rmin = count(retain_min, "retain_min", default=self.retain_min)
        rmax = count(retain_max, "retain_max", default=self.retain_max)
        if rmax < rmin:
            given = [n for n, v in (("retain_min", retain_min), ("retain_max", retain_max)) if v is not None]
            if len(given) == 1:
                other = RETAIN_MAX if given == ["retain_min"] else RETAIN_MIN
                raise InvalidValueError(
                    f"{given[0]}: retain_min={rmin} is above retain_max={rmax} (the table's {other}); "
                    "keep at least as many snapshots as at most")
        time_retained, moment = self.time_retained, self.older_than
        if older_than is not None:
            parsed = age_or_instant(older_than, "older_than")
            if isinstance(parsed, dt.timedelta):
                time_retained, moment = parsed, None
            else:
                moment = parsed
        return ExpirePolicy(retain_min=rmin, retain_max=rmax, time_retained=time_retained,
                            max_deletes=count(max_deletes, "max_deletes", default=self.max_deletes),
                            older_than=moment)

    @staticmethod
    def check_arguments(*, retain_min: Any = None, retain_max: Any = None, older_than: Any = None,
                        max_deletes: Any = None) -> None:
        """Check overrides before any table is known (an operator's arguments when the DAG is parsed)."""
        ExpirePolicy(retain_min=1).override(retain_min=retain_min, retain_max=retain_max, older_than=older_than,
                                            max_deletes=max_deletes)

    def threshold_millis(self, now_ms: int) -> int:
        """Epoch millis: a snapshot whose successor was committed before this may expire."""
        if self.older_than is not None:
            return epoch_millis(self.older_than)
        return now_ms - self.time_retained // dt.timedelta(milliseconds=1)
