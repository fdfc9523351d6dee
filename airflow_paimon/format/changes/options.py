"""Paimon's incremental-read options, read as Paimon reads them (`AbstractDataTableScan`):

- `incremental-between` = 'start,end': two tags (then a diff, unless `incremental-between-tag-to-snapshot`), else
  two snapshot ids;
- `incremental-between-timestamp` = 't1,t2': epoch milliseconds or timestamps;
- `incremental-between-scan-mode` = auto | delta | changelog | diff;
- `incremental-to-auto-tag` = a periodic tag: from the nearest earlier periodic tag to it (a diff).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..auto_tags import AutoTagRule
from ..errors import InvalidOptionError
from ..values import epoch_millis, option_boolean

if TYPE_CHECKING:
    from ..table import Table

MODES = ("auto", "changelog", "delta", "diff")
OPTION_KEYS = ("incremental-between", "incremental-between-timestamp", "incremental-to-auto-tag")


@dataclass(frozen=True)
class Request:
    """What a set of options asks for; `empty` when Paimon answers with no rows (an auto tag with no earlier
    one, or a timestamp range outside the table's snapshots)."""

    start: Any
    end: Any
    mode: str
    empty: bool = False


def check_mode(mode: Any, where: str = "mode") -> str:
    text = str(mode).strip().lower() if isinstance(mode, str) else mode
    if text not in MODES:
        raise InvalidOptionError(f"{where}: unknown mode {mode!r}; use one of {', '.join(MODES)}")
    return str(text)


def _pair(options: Mapping[str, str], key: str) -> tuple[str, str]:
    parts = options[key].split(",")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise InvalidOptionError(f"{key}: expected 'start,end' (start exclusive, end inclusive), got "
                                 f"{options[key]!r}")
    return parts[0].strip(), parts[1].strip()


def _millis(text: str, key: str) -> int:
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return epoch_millis(text)
    except InvalidOptionError:
        raise InvalidOptionError(f"{key}: {text!r} is neither epoch milliseconds nor a timestamp") from None


def _as_time(millis: int) -> dt.datetime:
    """A bound that is a time (a bare number would be a snapshot id)."""
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc)


def request_from_options(table: "Table", options: Mapping[str, str]) -> Request | None:
    """The change range the options ask for, or None when they ask for none."""
    mode = check_mode(options.get("incremental-between-scan-mode", "auto"), "incremental-between-scan-mode")
    if "incremental-between" in options:
        start, end = _pair(options, "incremental-between")
        if table.tags.exists(start) and table.tags.exists(end):
            if option_boolean(options.get("incremental-between-tag-to-snapshot", "false"),
                          "incremental-between-tag-to-snapshot"):
                return Request(table.tags.get(start).snapshot.id, table.tags.get(end).snapshot.id, mode)
            return Request(start, end, "diff")
        if not (start.isdigit() and end.isdigit()):
            raise InvalidOptionError(f"incremental-between: did not find two tags {start!r} and {end!r} on "
                                     f"{table.identifier}, and they are not two snapshot ids")
        return Request(int(start), int(end), mode)
    if "incremental-between-timestamp" in options:
        first, second = _pair(options, "incremental-between-timestamp")
        t1 = _millis(first, "incremental-between-timestamp")
        t2 = _millis(second, "incremental-between-timestamp")
        if t2 < t1:
            raise InvalidOptionError(f"incremental-between-timestamp: the end {second!r} is before the start "
                                     f"{first!r}")
        sm = table.snapshot_manager
        earliest, latest = sm.earliest_id(), sm.latest()
        if earliest is None or latest is None or t1 == t2 or t1 > latest.time_millis \
                or t2 < sm.snapshot(earliest).time_millis:
            return Request(0, 0, mode, empty=True)
        return Request(_as_time(t1), _as_time(t2), mode)
    if "incremental-to-auto-tag" in options:
        return _to_auto_tag(table, options["incremental-to-auto-tag"].strip())
    return None


def _to_auto_tag(table: "Table", name: str) -> Request:
    # Paimon's TagPeriodHandler reads only tag.creation-period and tag.period-formatter, whatever the mode.
    rule = AutoTagRule.from_options({**table.options(), "tag.automatic-creation": "process-time"})
    assert rule is not None
    end_time = rule.tag_time(name)
    if end_time is None:
        raise InvalidOptionError(f"incremental-to-auto-tag: {name!r} is not a periodic tag name of "
                                 f"{table.identifier} ({rule.describe()})")
    if not table.tags.exists(name):
        return Request(0, 0, "diff", empty=True)
    earlier = []
    for other in table.tags.names():
        when = rule.tag_time(other)
        if when is not None and when < end_time:
            earlier.append((when, other))
    if not earlier:
        return Request(0, 0, "diff", empty=True)
    return Request(max(earlier)[1], name, "diff")
