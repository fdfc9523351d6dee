"""Consumers: a named reader's position in a table, `consumer/consumer-<id>` holding `{"nextSnapshot": N}`.

The file is Paimon's own (`ConsumerManager`): Flink and pypaimon streaming reads with `consumer-id` read and write
the same file, and snapshot expiry keeps every snapshot from the lowest `nextSnapshot` on. Ids are stricter than
Paimon's (letters, digits, `.`, `_`, `-`; at most 200 characters), so that an id is always one file name.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Iterable

from .errors import CommitConflictError, CorruptFileError, InvalidOptionError, PaimonError

if TYPE_CHECKING:
    from .table import Table

CONSUMER_PREFIX = "consumer-"
_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
_ADVANCE_ATTEMPTS = 10


class ConsumerNotFoundError(PaimonError):
    """No consumer of that id exists on the table."""


def check_consumer_id(consumer_id: object) -> str:
    if not isinstance(consumer_id, str) or not _ID.fullmatch(consumer_id) or consumer_id in (".", ".."):
        raise InvalidOptionError(
            f"consumer id {consumer_id!r} is not allowed: use 1 to 200 letters, digits, '.', '_' or '-' "
            "(not '.' or '..')")
    return consumer_id


class ConsumerManager:
    def __init__(self, table: "Table"):
        self.table = table
        self.dir = f"{table.path}/consumer"

    def path(self, consumer_id: str) -> str:
        return f"{self.dir}/{CONSUMER_PREFIX}{check_consumer_id(consumer_id)}"

    def _read(self, path: str) -> int:
        return self._parse(path, self.table.io.read_bytes(path))

    def _parse(self, path: str, data: bytes) -> int:
        try:
            value = json.loads(data.decode("utf-8"))["nextSnapshot"]
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError("nextSnapshot is not a number")
            return value
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptFileError(f"consumer file {path} is not valid Paimon JSON ({e}); delete it "
                                   "(`airflow-paimon consumer delete`) or reset it") from None

    def get(self, consumer_id: str) -> int | None:
        """The consumer's next snapshot to read, or None when no such consumer exists."""
        try:
            return self._read(self.path(consumer_id))
        except FileNotFoundError:
            return None

    def require(self, consumer_id: str) -> int:
        nxt = self.get(consumer_id)
        if nxt is None:
            known = sorted(self.positions())
            hint = f"; existing consumers: {', '.join(map(repr, known))}" if known else "; the table has none"
            raise ConsumerNotFoundError(f"consumer {consumer_id!r} does not exist on {self.table.identifier}{hint}")
        return nxt

    def positions(self) -> dict[str, int]:
        """Every consumer's position, including those other engines made with ids this library would refuse to
        create: expiry must wait for them too."""
        out = {}
        for info in self.table.io.list_dir(self.dir):
            name = info.path.rsplit("/", 1)[-1]
            if name.startswith(CONSUMER_PREFIX) and len(name) > len(CONSUMER_PREFIX):
                try:
                    out[name[len(CONSUMER_PREFIX):]] = self._read(info.path)
                except FileNotFoundError:
                    continue
        return out

    def _check_position(self, next_snapshot: object, what: str) -> int:
        if not isinstance(next_snapshot, int) or isinstance(next_snapshot, bool) or next_snapshot < 1:
            raise InvalidOptionError(f"{what}: the next snapshot must be a snapshot id of at least 1, "
                                     f"got {next_snapshot!r}")
        sm = self.table.snapshot_manager
        earliest, latest = sm.earliest_id(), sm.latest_id()
        top = (latest or 0) + 1
        if next_snapshot > top or (earliest is not None and next_snapshot < earliest):
            have = f"snapshots {earliest}..{latest}" if earliest is not None else "no snapshots"
            raise InvalidOptionError(f"{what}: next snapshot {next_snapshot} is outside what {self.table.identifier}"
                                     f" can be read from ({have}; the next to come is {top})")
        return next_snapshot

    def _write(self, consumer_id: str, next_snapshot: int) -> None:
        self.table.io.write_bytes(self.path(consumer_id), json.dumps({"nextSnapshot": next_snapshot}).encode())

    def create(self, consumer_id: str, next_snapshot: int | None = None) -> int:
        """A new consumer positioned at `next_snapshot` (default: the next snapshot to be committed)."""
        path = self.path(consumer_id)
        if next_snapshot is None:
            next_snapshot = (self.table.snapshot_manager.latest_id() or 0) + 1
        nxt = self._check_position(next_snapshot, f"consumer {consumer_id!r}")
        if not self.table.io.create_exclusive(path, json.dumps({"nextSnapshot": nxt}).encode()):
            raise InvalidOptionError(f"consumer {consumer_id!r} already exists on {self.table.identifier}; reset "
                                     "it to move it, or delete it first")
        return nxt

    def advance(self, consumer_id: str, next_snapshot: int) -> int:
        """Move a consumer forward, after its reader's own commit landed; never backwards (use `reset`).

        The file is replaced only if nobody changed it since it was read (an e-tag compare-and-swap on object
        stores): two readers advancing one consumer at once cannot move it back."""
        self.require(consumer_id)
        nxt = self._check_position(next_snapshot, f"consumer {consumer_id!r}")
        path = self.path(consumer_id)
        for _ in range(_ADVANCE_ATTEMPTS):
            found = self.table.io.read_versioned(path)
            if found is None:
                self.require(consumer_id)  # deleted meanwhile: says so
                continue
            current = self._parse(path, found[0])
            if nxt < current:
                raise InvalidOptionError(f"consumer {consumer_id!r} is at snapshot {current}; advancing it to "
                                         f"{nxt} would move it back: reset it instead")
            if self.table.io.replace_if_unchanged(path, json.dumps({"nextSnapshot": nxt}).encode(), found[1]):
                return nxt
        raise CommitConflictError(f"consumer {consumer_id!r} of {self.table.identifier} kept changing under "
                                  "concurrent writers; try again")

    def reset(self, consumer_id: str, next_snapshot: int) -> int:
        self.require(consumer_id)
        nxt = self._check_position(next_snapshot, f"consumer {consumer_id!r}")
        self._write(consumer_id, nxt)
        return nxt

    def delete(self, consumer_id: str) -> None:
        self.require(consumer_id)
        self.table.io.delete(self.path(consumer_id))

    def lapsed(self, before_ms: int) -> dict[str, str]:
        """Consumers (id -> file) whose file was last written before `before_ms`: `consumer.expiration-time` lets
        them go, as Paimon's `ConsumerManager.expire` does (by the file's modification time)."""
        out = {}
        for info in self.table.io.list_dir(self.dir):
            name = info.path.rsplit("/", 1)[-1]
            if name.startswith(CONSUMER_PREFIX) and len(name) > len(CONSUMER_PREFIX) and info.mtime_ms < before_ms:
                out[name[len(CONSUMER_PREFIX):]] = info.path
        return out

    def min_next(self, ignore: Iterable[str] = ()) -> int | None:
        """The lowest position of the live consumers: no snapshot from it on may expire."""
        skip = set(ignore)
        positions = [n for cid, n in self.positions().items() if cid not in skip]
        return min(positions) if positions else None
