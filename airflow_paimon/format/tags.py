"""Tags: named, long-lived snapshots stored as `tag/tag-<name>` (the snapshot JSON plus tag fields).

A tag file is the tagged snapshot's JSON, exactly as Paimon writes it. When the tag has a retention, Paimon adds
two fields: `tagCreateTime` (a Java LocalDateTime, written as `[y, mo, d, h, mi, s, nanos]` in the writer's local
time) and `tagTimeRetained` (a Java Duration, written as decimal seconds). Without a retention neither field is
written, so readers of Paimon <= 0.7 can still read the tag.

Creating and renaming never overwrite an existing tag file (create-if-absent); replacing one writes the whole
file under a temporary name and renames it. Deleting a tag, expiring tags and replacing a tag's snapshot also
delete the files only that tag used (see `cleanup.py`); a file another tag or any retained snapshot uses stays.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .errors import (
    CorruptFileError,
    InvalidOptionError,
    PaimonError,
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
)
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .cleanup import CleanupResult
    from .table import Table

TAG_PREFIX = "tag-"
MAX_TAG_NAME_LENGTH = 255
# Local and POSIX filesystems hold file names of at most 255 bytes; a tag file is written atomically through
# a temporary ".tag-<name>.<32 hex>.tmp" next to it, so the name itself may take 255 - 42 bytes there.
MAX_LOCAL_TAG_NAME_BYTES = 255 - len(".tag-") - len(".0123456789abcdef0123456789abcdef.tmp")
_TAG_FIELDS = ("tagCreateTime", "tagTimeRetained")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


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


def to_local_naive(value: Any) -> dt.datetime:
    """A point in time as a naive local date-time (how tag create times are stored and compared)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value / 1000)
    if isinstance(value, str):
        from .table import to_epoch_millis
        try:
            return dt.datetime.fromtimestamp(to_epoch_millis(value) / 1000)
        except (ValueError, PaimonError):
            raise InvalidOptionError(f"{value!r} is not a point in time (ISO 8601, e.g. '2026-11-20 02:00')") \
                from None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value
        return value.astimezone().replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    raise InvalidOptionError(f"cannot read {value!r} as a point in time")


def check_tag_name(name: Any) -> str:
    """A name a new tag may have; InvalidOptionError (naming the rule broken) otherwise."""
    if not isinstance(name, str):
        raise InvalidOptionError(f"tag name must be a string, not {type(name).__name__}")
    if not name.strip():
        raise InvalidOptionError("tag name must not be blank")
    if len(name) > MAX_TAG_NAME_LENGTH:
        raise InvalidOptionError(
            f"tag name is {len(name)} characters long; at most {MAX_TAG_NAME_LENGTH} are allowed")
    if name.strip().isdigit() or re.fullmatch(r"\s*[+-]?\d+\s*", name):
        raise InvalidOptionError(
            f"tag name {name!r} is purely numeric and would be mistaken for a snapshot id; add a letter or a dash")
    _check_path_safe(name)
    return name


def _check_path_safe(name: Any) -> str:
    """The checks that keep a tag name inside `tag/`: applied to lookups of tags other tools may have made."""
    if not isinstance(name, str):
        raise InvalidOptionError(f"tag name must be a string, not {type(name).__name__}")
    if not name.strip():
        raise InvalidOptionError("tag name must not be blank")
    if "/" in name or "\\" in name:
        raise InvalidOptionError(f"tag name {name!r} must not contain '/' or '\\'")
    if ".." in name:
        raise InvalidOptionError(f"tag name {name!r} must not contain '..'")
    if _CONTROL.search(name):
        raise InvalidOptionError(f"tag name {name!r} must not contain control characters")
    return name


def parse_time_retained(value: Any, what: str = "time_retained") -> dt.timedelta | None:
    """None, a timedelta or a Paimon duration string (`7d`, `12 h`) -> a positive timedelta (or None)."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        retained = value
    elif isinstance(value, str):
        from .options import parse_duration
        retained = parse_duration(value, what)
    else:
        raise InvalidOptionError(f"{what}: {value!r} is not a duration (examples: '7d', '12 h')")
    if retained <= dt.timedelta(0):
        raise InvalidOptionError(f"{what}: the retention must be positive, got {value!r}")
    return retained


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


class TagManager:
    def __init__(self, table: "Table"):
        self.table = table
        self.io = table.io
        self.dir = f"{table.path}/tag"

    def path(self, name: str) -> str:
        return f"{self.dir}/{TAG_PREFIX}{_check_path_safe(name)}"

    def check_new_name(self, name: Any) -> str:
        """check_tag_name, plus: the tag file name fits this filesystem."""
        check_tag_name(name)
        size = len(name.encode("utf-8"))
        if self.io.local and size > MAX_LOCAL_TAG_NAME_BYTES:
            raise InvalidOptionError(
                f"tag name is {size} bytes long in UTF-8; on a local filesystem at most "
                f"{MAX_LOCAL_TAG_NAME_BYTES} fit (file names hold 255 bytes, including the 'tag-' prefix and "
                "the temporary name of the atomic write)")
        return name

    # ---- reading ---------------------------------------------------------------------------------------
    def _fits(self, name: str) -> bool:
        """Whether a tag of this name can exist here: a local file name holds at most 255 bytes."""
        return not self.io.local or len(f"{TAG_PREFIX}{name}".encode()) <= 255

    def _read(self, name: str, path: str) -> Tag:
        data = self.io.read_bytes(path)
        try:
            return Tag.from_json(name, data.decode("utf-8"))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            reason = "empty" if not data.strip() else str(e).splitlines()[0] if str(e) else type(e).__name__
            raise CorruptFileError(f"tag file {path} is not valid Paimon JSON ({reason}); restore it from a "
                                   "backup, or delete that file to drop the tag") from None

    def exists(self, name: str) -> bool:
        return self._fits(_check_path_safe(name)) and self.io.exists(self.path(name))

    def get(self, name: str) -> Tag:
        try:
            if not self._fits(_check_path_safe(name)):
                raise FileNotFoundError(name)
            return self._read(name, self.path(name))
        except FileNotFoundError:
            known = sorted(self.names())
            shown = ", ".join(repr(n) for n in known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20
                                                              else "")
            hint = f"; existing tags: {shown}" if known else "; the table has no tags"
            what = repr(name) if len(name) <= 80 else f"{name[:40]!r}... ({len(name)} characters)"
            raise TagNotFoundError(f"tag {what} does not exist on {self.table.identifier}{hint}") from None

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
                tags.append(self._read(name, f"{self.dir}/{TAG_PREFIX}{name}"))
            except FileNotFoundError:
                continue  # deleted between listing and reading
        return sorted(tags, key=lambda t: (t.snapshot.id, t.name))

    # ---- which snapshot a new tag points at ------------------------------------------------------------
    def _snapshot_by_id(self, snapshot_id: int) -> Snapshot:
        sm = self.table.snapshot_manager
        try:
            return sm.snapshot(int(snapshot_id))
        except SnapshotNotFoundError:
            # Expired, but a tag may still hold it (Paimon's findSnapshot does the same).
            for t in self.list():
                if t.snapshot.id == int(snapshot_id):
                    return t.snapshot
            earliest, latest = sm.earliest_id(), sm.latest_id()
            held = f" (retained snapshots: {earliest}..{latest})" if earliest is not None else ""
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} of {self.table.identifier} does not exist{held} "
                "and no tag holds it") from None

    def snapshot_as_of(self, when: Any) -> Snapshot:
        """The latest snapshot committed at or before `when`, exactly, or a clear error (see time_travel.py)."""
        from .table import to_epoch_millis
        from .time_travel import snapshot_at
        return snapshot_at(self.table, to_epoch_millis(when), alternative="tag a snapshot id instead").snapshot

    def _resolve(self, snapshot_id: int | None, as_of: Any) -> Snapshot:
        if snapshot_id is not None and as_of is not None:
            raise InvalidOptionError("give snapshot_id or as_of, not both")
        if snapshot_id is not None:
            if isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int) and not str(snapshot_id).isdigit():
                raise InvalidOptionError(f"snapshot id must be a whole number, not {snapshot_id!r}")
            return self._snapshot_by_id(int(snapshot_id))
        if as_of is not None:
            return self.snapshot_as_of(as_of)
        latest = self.table.snapshot_manager.latest()
        if latest is None:
            raise SnapshotNotFoundError(f"{self.table.identifier} has no snapshot to tag yet")
        return latest

    def _default_retained(self) -> dt.timedelta | None:
        raw = self.table.options().get("tag.default-time-retained")
        return parse_time_retained(raw, "tag.default-time-retained") if raw is not None else None

    # ---- writing ---------------------------------------------------------------------------------------
    def create(self, name: str, snapshot_id: int | None = None, as_of: Any = None,
               time_retained: dt.timedelta | str | None = None, replace: bool = False) -> Tag:
        """Tag the latest snapshot (or snapshot `snapshot_id`, or the latest at or before `as_of`).

        Idempotent: when the tag exists on the same snapshot it is returned unchanged. When it exists on another
        snapshot, TagAlreadyExistsError, unless `replace` (then the files only the old tag used are deleted).
        `time_retained` defaults to the table option `tag.default-time-retained` (none: kept until deleted).
        """
        self.check_new_name(name)
        retained = parse_time_retained(time_retained) if time_retained is not None else self._default_retained()
        snap = self._resolve(snapshot_id, as_of)
        snap = replace_extra(snap)
        for _ in range(3):
            existing = self._try_get(name)
            if existing is not None:
                if same_snapshot(existing.snapshot, snap):
                    if replace and time_retained is not None and existing.time_retained != retained:
                        tag = Tag(name, snap, local_now(), retained)
                        self.io.write_bytes(self.path(name), tag.to_json().encode())
                        return self.get(name)
                    return existing
                if not replace:
                    raise TagAlreadyExistsError(
                        f"tag {name!r} already exists on snapshot {existing.snapshot.id} of "
                        f"{self.table.identifier}, not on snapshot {snap.id}; delete it first or replace it")
                return self._replace(existing, snap, retained)
            tag = Tag(name, snap, local_now() if retained is not None else None, retained)
            if self.io.create_exclusive(self.path(name), tag.to_json().encode()):
                return Tag.from_json(name, tag.to_json())
            # Another writer created it between our check and our write: look again.
        raise PaimonError(f"tag {name!r} keeps changing under concurrent writers; try again")

    def replace(self, name: str, snapshot_id: int | None = None, as_of: Any = None,
                time_retained: dt.timedelta | str | None = None) -> Tag:
        """Point an existing tag at another snapshot (files only the old one used are deleted)."""
        check_tag_name(name)
        self.get(name)
        return self.create(name, snapshot_id, as_of, time_retained, replace=True)

    def _replace(self, old: Tag, snap: Snapshot, retained: dt.timedelta | None) -> Tag:
        from .cleanup import cleanup_after_tag_replace
        tag = Tag(old.name, snap, local_now() if retained is not None else None, retained)
        self.io.write_bytes(self.path(old.name), tag.to_json().encode())
        cleanup_after_tag_replace(self.table, old)
        return self.get(old.name)

    def _try_get(self, name: str) -> Tag | None:
        try:
            return self._read(name, self.path(name))
        except FileNotFoundError:
            return None

    def rename(self, old: str, new: str) -> Tag:
        """Give a tag a new name. The new file is created (if absent) before the old one goes, so a crash in
        between leaves both names, never neither."""
        _check_path_safe(old)
        self.check_new_name(new)
        tag = self.get(old)
        if old == new:
            return tag
        if self.exists(new):
            raise TagAlreadyExistsError(f"tag {new!r} already exists on {self.table.identifier}")
        text = self.io.read_bytes(self.path(old))
        if not self.io.create_exclusive(self.path(new), text):
            raise TagAlreadyExistsError(f"tag {new!r} already exists on {self.table.identifier}")
        self.io.delete(self.path(old))
        return self.get(new)

    def delete(self, name: str, dry_run: bool = False) -> "CleanupResult":
        """Delete a tag and the files only it used (files another tag or a retained snapshot uses stay)."""
        from .cleanup import delete_tags
        _check_path_safe(name)
        return delete_tags(self.table, [self.get(name)], dry_run=dry_run)

    def expire(self, now: Any = None, dry_run: bool = False) -> "CleanupResult":
        """Delete tags whose retention ran out, and the oldest periodic tags beyond `tag.num-retained-max`."""
        from .cleanup import expire_tags
        return expire_tags(self.table, now=now, dry_run=dry_run)


def latest_snapshot_at_or_before(sm: Any, millis: int) -> Snapshot | None:
    """The snapshot manager's binary search over the hinted id range; if that range has a hole (left by a crash
    in the middle of a rollback), the same search over the listed ids."""
    try:
        return sm.latest_at_or_before(millis)
    except SnapshotNotFoundError:
        pass
    ids = sm.ids()
    lo, hi, found = 0, len(ids) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        snap = sm.snapshot(ids[mid])
        if snap.time_millis <= millis:
            found, lo = snap, mid + 1
        else:
            hi = mid - 1
    return found


def replace_extra(snap: Snapshot) -> Snapshot:
    """The snapshot without tag-only fields (a snapshot read from a tag file may carry them in `extra`)."""
    if any(k in snap.extra for k in _TAG_FIELDS):
        return replace(snap, extra={k: v for k, v in snap.extra.items() if k not in _TAG_FIELDS})
    return snap


def epoch_millis_now() -> int:
    return int(time.time() * 1000)
