"""Paimon's long-lived changelog files (``ChangelogManager``): ``changelog/changelog-<id>`` holds an expired
snapshot's JSON, and ``changelog/EARLIEST`` / ``changelog/LATEST`` hint the range (hints only: ids are listed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..snapshot import Snapshot, read_snapshot_file

if TYPE_CHECKING:
    from ..table import Table

PREFIX = "changelog-"


class LongLivedChangelogs:
    """The long-lived changelog files of one table."""

    def __init__(self, table: "Table"):
        self.io = table.io
        self.dir = f"{table.path}/changelog"

    def path(self, changelog_id: int) -> str:
        return f"{self.dir}/{PREFIX}{changelog_id}"

    def ids(self) -> list[int]:
        out = []
        for info in self.io.list_dir(self.dir):
            name = info.path.rsplit("/", 1)[-1]
            if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
                out.append(int(name[len(PREFIX):]))
        return sorted(out)

    def read(self, changelog_id: int) -> Snapshot:
        """The changelog; FileNotFoundError when it is gone."""
        return read_snapshot_file(self.io, self.path(changelog_id), "changelog")

    def keep(self, snapshot_path: str, changelog_id: int) -> None:
        """Leave an expiring snapshot behind as a changelog: its file's own bytes (the JSON Paimon wrote, every
        field kept), then the LATEST hint, as Paimon's snapshot expiry does before deleting the snapshot file.
        A changelog of that id already there (an earlier run stopped after writing it) is left as it is.
        Beyond Paimon, the first changelog also gets an EARLIEST hint: pypaimon's ChangelogManager reads only
        the hint, where Paimon falls back to listing the directory (also when the hint names a changelog gone)."""
        if not self.io.is_file(self.path(changelog_id)):
            self.io.create_exclusive(self.path(changelog_id), self.io.read_text(snapshot_path).encode())
        self.latest_hint(changelog_id)
        earliest = self.hint("EARLIEST")
        if earliest is None or not self.io.is_file(self.path(earliest)):
            self.earliest_hint(changelog_id)

    def hint(self, name: str) -> int | None:
        try:
            text = self.io.read_text(f"{self.dir}/{name}").strip()
        except FileNotFoundError:
            return None
        return int(text) if text.lstrip("-").isdigit() else None

    def latest_hint(self, changelog_id: int) -> None:
        self.io.write_bytes(f"{self.dir}/LATEST", str(changelog_id).encode())

    def earliest_hint(self, changelog_id: int) -> None:
        self.io.write_bytes(f"{self.dir}/EARLIEST", str(changelog_id).encode())
