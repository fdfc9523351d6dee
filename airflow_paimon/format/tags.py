"""Tags: named, long-lived snapshots stored as `tag/tag-<name>` (the snapshot JSON plus tag fields)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .errors import TagNotFoundError
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .table import Table

TAG_PREFIX = "tag-"


def local_datetime_to_json(value: dt.datetime) -> list[int]:
    """Java's LocalDateTime as Paimon's Jackson mapper writes it: [y, mo, d, h, mi, s, nanos]."""
    return [value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond * 1000]


def json_to_local_datetime(value: object) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    parts = list(value) + [0] * (7 - len(value))  # type: ignore[arg-type]
    return dt.datetime(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6] // 1000)


def duration_to_json(value: dt.timedelta) -> float:
    """Java's Duration as Paimon's Jackson mapper writes it: decimal seconds."""
    return value.total_seconds()


def json_to_duration(value: object) -> dt.timedelta | None:
    if value is None:
        return None
    return dt.timedelta(seconds=float(value))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Tag:
    name: str
    snapshot: Snapshot
    create_time: dt.datetime | None = None
    time_retained: dt.timedelta | None = None

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    def to_json(self) -> str:
        import json
        doc = self.snapshot.without_extra().to_dict()
        if self.create_time is not None:
            doc["tagCreateTime"] = local_datetime_to_json(self.create_time)
        if self.time_retained is not None:
            doc["tagTimeRetained"] = duration_to_json(self.time_retained)
        return json.dumps(doc, indent=2)

    @classmethod
    def from_json(cls, name: str, text: str) -> "Tag":
        snap = Snapshot.from_json(text)
        create = json_to_local_datetime(snap.extra.get("tagCreateTime"))
        retained = json_to_duration(snap.extra.get("tagTimeRetained"))
        extra = {k: v for k, v in snap.extra.items() if k not in ("tagCreateTime", "tagTimeRetained")}
        return cls(name, replace(snap, extra=extra), create, retained)


class TagManager:
    def __init__(self, table: "Table"):
        self.table = table
        self.io = table.io
        self.dir = f"{table.path}/tag"

    def path(self, name: str) -> str:
        return f"{self.dir}/{TAG_PREFIX}{name}"

    def exists(self, name: str) -> bool:
        return self.io.exists(self.path(name))

    def get(self, name: str) -> Tag:
        try:
            return Tag.from_json(name, self.io.read_text(self.path(name)))
        except FileNotFoundError:
            raise TagNotFoundError(f"tag {name!r} does not exist on {self.table.identifier}") from None

    def names(self) -> list[str]:
        out = []
        for info in self.io.list_dir(self.dir):
            base = info.path.rsplit("/", 1)[-1]
            if base.startswith(TAG_PREFIX):
                out.append(base[len(TAG_PREFIX):])
        return out

    def list(self) -> list[Tag]:
        """All tags, ordered by snapshot id then name."""
        tags = []
        for name in self.names():
            try:
                tags.append(self.get(name))
            except TagNotFoundError:
                continue
        return sorted(tags, key=lambda t: (t.snapshot.id, t.name))

    def latest_at_or_before(self, time_millis: int) -> Tag | None:
        best = None
        for t in self.list():
            if t.snapshot.time_millis <= time_millis and (best is None or t.snapshot.id >= best.snapshot.id):
                best = t
        return best
