"""How long a table keeps its changelog, and whether that outlives its snapshots (Paimon's decoupled changelog).

Paimon's options (``CoreOptions``): ``changelog.num-retained.min``, ``changelog.num-retained.max`` and
``changelog.time-retained`` have no default; each unset one takes its ``snapshot.*`` counterpart. The changelog
is *decoupled* exactly when one of them keeps more than the snapshot option does (a larger max, a larger min or a
longer time), as ``CoreOptions.changelogLifecycleDecoupled()`` decides. Then snapshot expiry leaves each expired
snapshot behind as ``changelog/changelog-<id>`` and changelog expiry later deletes those by these limits, at most
``snapshot.expire.limit`` in one run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Mapping

from ..errors import InvalidValueError
from ..values import count, duration
from .expire_policy import RETAIN_MAX, RETAIN_MIN, ExpirePolicy

__all__ = ["ChangelogPolicy", "CHANGELOG_OPTIONS"]

CHANGELOG_MIN, CHANGELOG_MAX = "changelog.num-retained.min", "changelog.num-retained.max"
CHANGELOG_TIME = "changelog.time-retained"
CHANGELOG_OPTIONS = (CHANGELOG_MIN, CHANGELOG_MAX, CHANGELOG_TIME)


@dataclass(frozen=True)
class ChangelogPolicy:
    """Keep at least ``retain_min`` and at most ``retain_max`` changelogs (counted back from the latest snapshot,
    as Paimon counts them); a changelog may go once it was committed more than ``time_retained`` before now."""

    retain_min: int
    retain_max: int
    time_retained: dt.timedelta
    max_deletes: int
    decoupled: bool

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ChangelogPolicy:
        """The table's changelog limits, each unset one falling back to its snapshot option (as Paimon reads them);
        a bad value is an InvalidValueError naming the option."""
        snapshots = ExpirePolicy.from_options(options)

        def option(key: str) -> str | None:
            raw = options.get(key)
            return None if raw is None else str(raw).strip()

        raw_min, raw_max, raw_time = option(CHANGELOG_MIN), option(CHANGELOG_MAX), option(CHANGELOG_TIME)
        rmin = snapshots.retain_min if raw_min is None else count(raw_min, CHANGELOG_MIN)
        rmax = snapshots.retain_max if raw_max is None else count(raw_max, CHANGELOG_MAX)
        if rmax < rmin:
            max_from = CHANGELOG_MAX if raw_max is not None else f"{RETAIN_MAX}, which it defaults to"
            min_from = CHANGELOG_MIN if raw_min is not None else f"{RETAIN_MIN}, which it defaults to"
            raise InvalidValueError(
                f"{CHANGELOG_MAX}: the changelog would keep at most {rmax} ({max_from}) but at least {rmin} "
                f"({min_from}); set {CHANGELOG_MAX} to at least {rmin}")
        time_retained = snapshots.time_retained if raw_time is None else duration(raw_time, CHANGELOG_TIME)
        decoupled = (rmax > snapshots.retain_max or time_retained > snapshots.time_retained
                     or rmin > snapshots.retain_min)
        return cls(rmin, rmax, time_retained, snapshots.max_deletes, decoupled)

