"""The roots of a table, from which every live file is reached: snapshots, tags and long-lived changelogs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SnapshotNotFoundError, UnsupportedTableError
from ..snapshot import Snapshot, read_snapshot_file

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class Root:
    kind: str      # "snapshot", "tag" or "changelog"
    name: str      # the snapshot / changelog id, or the tag name
    snapshot: Snapshot

    @property
    def key(self) -> tuple:
        return (self.kind, self.name, self.snapshot.base_manifest_list, self.snapshot.delta_manifest_list)


def check_supported(table: "Table") -> None:
    branches = [d for d in table.io.list_subdirs(f"{table.path}/branch") if d.startswith("branch-")]
    if branches:
        raise UnsupportedTableError(
            f"{table.identifier} has branches ({', '.join(sorted(b[7:] for b in branches))}); expiry, tag "
            "deletion, rollback and orphan cleanup are refused because branch snapshots share its files")


def snapshot_roots(table: "Table") -> list[Root]:
    sm = table.snapshot_manager
    out = []
    for sid in sm.ids():
        try:
            out.append(Root("snapshot", str(sid), sm.snapshot(sid)))
        except SnapshotNotFoundError:
            continue
    return out


def tag_roots(table: "Table") -> list[Root]:
    return [Root("tag", t.name, t.snapshot) for t in table.tags.list()]


def changelog_roots(table: "Table") -> list[Root]:
    """Paimon's long-lived changelogs (`changelog/changelog-<id>`): kept, never removed here."""
    out = []
    cdir = f"{table.path}/changelog"
    for info in table.io.list_dir(cdir):
        name = info.path.rsplit("/", 1)[-1]
        if name.startswith("changelog-") and name[10:].isdigit():
            try:
                out.append(Root("changelog", name[10:], read_snapshot_file(table.io, info.path, "changelog")))
            except FileNotFoundError:
                continue
    return out


def all_roots(table: "Table") -> list[Root]:
    return snapshot_roots(table) + tag_roots(table) + changelog_roots(table)


def root_still_exists(table: "Table", root: Root) -> bool:
    if root.kind == "snapshot":
        return table.snapshot_manager.exists(int(root.name))
    if root.kind == "tag":
        return table.io.exists(f"{table.path}/tag/tag-{root.name}")
    return table.io.exists(f"{table.path}/changelog/changelog-{root.name}")
