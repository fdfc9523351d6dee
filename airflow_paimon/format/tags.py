"""Tags: named, long-lived snapshots stored as `tag/tag-<name>` (see tag_file.py for the file's content).

Creating and renaming never overwrite an existing tag file (create-if-absent); replacing one writes the whole
file under a temporary name and renames it. Deleting a tag, expiring tags and replacing a tag's snapshot also
delete the files only that tag used (see `upkeep/tag_cleanup.py`); a file another tag or any retained snapshot
uses stays.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from .errors import (
    CorruptFileError,
    InvalidOptionError,
    InvalidValueError,
    PaimonError,
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
)
from .snapshot import Snapshot
from .tag_file import MAX_LOCAL_TAG_NAME_BYTES, TAG_PREFIX, Tag, local_now, replace_extra, same_snapshot
from .time_travel import snapshot_at
from .upkeep.tag_cleanup import cleanup_after_tag_replace
from .values import count, duration, epoch_millis, existing_tag_name, tag_name

if TYPE_CHECKING:
    from .table import Table


class TagManager:
    def __init__(self, table: "Table"):
        self.table = table
        self.io = table.io
        self.dir = f"{table.path}/tag"

    def path(self, name: str) -> str:
        return f"{self.dir}/{TAG_PREFIX}{existing_tag_name(name)}"

    def check_new_name(self, name: Any) -> str:
        """values.tag_name, plus: the tag file name fits this filesystem."""
        checked = tag_name(name)
        size = len(checked.encode("utf-8"))
        if self.io.local and size > MAX_LOCAL_TAG_NAME_BYTES:
            raise InvalidValueError(
                f"tag name: is {size} bytes long in UTF-8; on a local filesystem at most "
                f"{MAX_LOCAL_TAG_NAME_BYTES} fit (file names hold 255 bytes, including the 'tag-' prefix and "
                "the temporary name of the atomic write)")
        return checked

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
        return self._fits(existing_tag_name(name)) and self.io.is_file(self.path(name))

    def get(self, name: str) -> Tag:
        try:
            if not self._fits(existing_tag_name(name)):
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
        return snapshot_at(self.table, epoch_millis(when, "as_of"), alternative="tag a snapshot id instead").snapshot

    def _resolve(self, snapshot_id: int | None, as_of: Any) -> Snapshot:
        if snapshot_id is not None and as_of is not None:
            raise InvalidOptionError("give snapshot_id or as_of, not both")
        if snapshot_id is not None:
            return self._snapshot_by_id(count(snapshot_id, "snapshot_id"))
        if as_of is not None:
            return self.snapshot_as_of(as_of)
        latest = self.table.snapshot_manager.latest()
        if latest is None:
            raise SnapshotNotFoundError(f"{self.table.identifier} has no snapshot to tag yet")
        return latest

    def _default_retained(self) -> dt.timedelta | None:
        raw = self.table.options().get("tag.default-time-retained")
        return duration(raw, "tag.default-time-retained", positive=True) if raw is not None else None

    # ---- writing ---------------------------------------------------------------------------------------
    def create(self, name: str, snapshot_id: int | None = None, as_of: Any = None,
               time_retained: dt.timedelta | str | None = None, replace: bool = False) -> Tag:
        """Tag the latest snapshot (or snapshot `snapshot_id`, or the latest at or before `as_of`).

        Idempotent: when the tag exists on the same snapshot it is returned unchanged. When it exists on another
        snapshot, TagAlreadyExistsError, unless `replace` (then the files only the old tag used are deleted).
        `time_retained` defaults to the table option `tag.default-time-retained` (none: kept until deleted).
        """
        self.check_new_name(name)
        retained = duration(time_retained, "time_retained", positive=True) if time_retained is not None \
            else self._default_retained()
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
        tag_name(name)
        self.get(name)
        return self.create(name, snapshot_id, as_of, time_retained, replace=True)

    def _replace(self, old: Tag, snap: Snapshot, retained: dt.timedelta | None) -> Tag:
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
        existing_tag_name(old)
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
