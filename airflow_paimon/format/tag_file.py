"""A tag file's content: the tagged snapshot's JSON plus Paimon's tag fields (tag names: values.tag_name).

A tag file is the tagged snapshot's JSON, exactly as Paimon writes it. When the tag has a retention, Paimon adds
two fields: `tagCreateTime` (a Java LocalDateTime, written as `[y, mo, d, h, mi, s, nanos]` in the writer's local
time) and `tagTimeRetained` (a Java Duration, written as decimal seconds). Without a retention neither field is
written, so readers of Paimon <= 0.7 can still read the tag.

Kept apart from the tag manager (tags.py) so that the upkeep rules can read tags without depending on it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any

from .snapshot import Snapshot
from .values import instant

TAG_PREFIX = "tag-"
# Local and POSIX filesystems hold file names of at most 255 bytes; a tag file is written atomically through
# a temporary ".tag-<name>.<32 hex>.tmp" next to it, so the name itself may take 255 - 42 bytes there.
MAX_LOCAL_TAG_NAME_BYTES = 255 - len(".tag-") - len(".0123456789abcdef0123456789abcdef.tmp")
_TAG_FIELDS = ("tagCreateTime", "tagTimeRetained")


def local_datetime_to_json(value: dt.datetime) -> list[int]:
    """Java's LocalDateTime as Paimon's Jackson mapper writes it: [y, mo, d, h, mi, s, nanos]."""
    return [value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond * 1000]


def json_to_local_datetime(value: object) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"a LocalDateTime is an ISO string or a list of fields, not {value!r}")
    parts = list(value) + [0] * (7 - len(value))
    return dt.datetime(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6] // 1000)


def duration_to_json(value: dt.timedelta) -> float:
    """Java's Duration as Paimon's Jackson mapper writes it: decimal seconds."""
    return value.total_seconds()


def json_to_duration(value: object) -> dt.timedelta | None:
    if value is None:
        return None
    return dt.timedelta(seconds=float(value))  # type: ignore[arg-type]


def java_duration_string(value: dt.timedelta) -> str:
    """`Duration.toString()` as Java prints it (`PT24H`, `PT1H30M`, `PT0.5S`): the `$tags` time_retained column."""
    micros = value // dt.timedelta(microseconds=1)
    if micros == 0:
        return "PT0S"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, frac = divmod(rest, 1_000_000)
    out = "PT"
    if hours:
        out += f"{sign}{hours}H"
    if minutes:
        out += f"{sign}{minutes}M"
    if seconds or frac:
        text = f"{seconds}" + (f".{frac:06d}".rstrip("0") if frac else "")
        out += f"{sign}{text}S"
    return out


def local_now() -> dt.datetime:
    """Now as a naive local date-time: what Java's LocalDateTime.now() gives for `tagCreateTime`."""
    return dt.datetime.now()


def to_local_naive(value: Any, name: str = "now") -> dt.datetime:
    """A point in time as a naive local date-time (how tag create times are stored and compared). A naive
    ``datetime`` or ``date`` is taken as that local wall-clock time already, the clock tag create times use;
    every other form is read by ``values.instant`` (an ISO string without an offset is UTC there)."""
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return dt.datetime.combine(value, dt.time())
    return instant(value, name).astimezone().replace(tzinfo=None)


@dataclass(frozen=True)
class Tag:
    name: str
    snapshot: Snapshot
    create_time: dt.datetime | None = None
    time_retained: dt.timedelta | None = None

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    @property
    def expires_at(self) -> dt.datetime | None:
        """Local time after which the tag's retention has run out (None: kept until deleted)."""
        if self.create_time is None or self.time_retained is None:
            return None
        return self.create_time + self.time_retained

    def to_json(self) -> str:
        doc = self.snapshot.to_dict()
        for k in _TAG_FIELDS:
            doc.pop(k, None)
        if self.time_retained is not None:
            # As Paimon: both fields only with a retention, so that old readers keep reading plain tags.
            doc["tagCreateTime"] = local_datetime_to_json(self.create_time or local_now())
            doc["tagTimeRetained"] = duration_to_json(self.time_retained)
        return json.dumps(doc, indent=2)

    @classmethod
    def from_json(cls, name: str, text: str) -> "Tag":
        snap = Snapshot.from_json(text)
        create = json_to_local_datetime(snap.extra.get("tagCreateTime"))
        retained = json_to_duration(snap.extra.get("tagTimeRetained"))
        extra = {k: v for k, v in snap.extra.items() if k not in _TAG_FIELDS}
        return cls(name, replace(snap, extra=extra), create, retained)


def same_snapshot(a: Snapshot, b: Snapshot) -> bool:
    """Whether two snapshot documents describe the same committed snapshot (not just the same id)."""
    return (a.id == b.id and a.base_manifest_list == b.base_manifest_list
            and a.delta_manifest_list == b.delta_manifest_list)


def replace_extra(snap: Snapshot) -> Snapshot:
    """The snapshot without tag-only fields (a snapshot read from a tag file may carry them in `extra`)."""
    if any(k in snap.extra for k in _TAG_FIELDS):
        return replace(snap, extra={k: v for k, v in snap.extra.items() if k not in _TAG_FIELDS})
    return snap

