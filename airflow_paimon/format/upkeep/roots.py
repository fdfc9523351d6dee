"""The roots of a table, from which every live file is reached: snapshots, tags and long-lived changelogs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import SnapshotNotFoundError, UnsupportedTableError
from ..snapshot import Snapshot
from .long_lived_changelogs import LongLivedChangelogs

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


def changelog_keeps(changelog: Snapshot) -> Snapshot:
    """What a long-lived changelog keeps alive once its snapshot expired: its changelog manifest list (and the
    changelog files it lists) when it has one, else its delta manifest list (and the files that commit added,
    which a changelog-mode read of a table without producer takes as its changelog). Its data files as a whole
    snapshot, its index and statistics files are left to snapshot expiry, as Paimon's ChangelogDeletion does."""
    if changelog.changelog_manifest_list:
        return replace(changelog, base_manifest_list="", delta_manifest_list="", index_manifest=None,
                       statistics=None)
    return replace(changelog, base_manifest_list="", index_manifest=None, statistics=None)


def changelog_root(changelog_id: int, changelog: Snapshot) -> Root:
    return Root("changelog", str(changelog_id), changelog_keeps(changelog))


def long_lived_changelogs(table: "Table") -> dict[int, Snapshot]:
    """id -> the long-lived changelog file (`changelog/changelog-<id>`) as written, every list it names."""
    files = LongLivedChangelogs(table)
    out = {}
    for cid in files.ids():
        try:
            out[cid] = files.read(cid)
        except FileNotFoundError:
            continue
    return out


def changelog_roots(table: "Table") -> list[Root]:
    """Paimon's long-lived changelogs, each as the part of it that upkeep keeps alive (changelog_keeps)."""
    return [changelog_root(cid, snap) for cid, snap in long_lived_changelogs(table).items()]


def all_roots(table: "Table") -> list[Root]:
    return snapshot_roots(table) + tag_roots(table) + changelog_roots(table)


def root_still_exists(table: "Table", root: Root) -> bool:
    if root.kind == "snapshot":
        return table.snapshot_manager.exists(int(root.name))
    if root.kind == "tag":
        return table.io.is_file(f"{table.path}/tag/tag-{root.name}")
    return table.io.is_file(f"{table.path}/changelog/changelog-{root.name}")
