"""The plan of an upkeep operation (what the removed roots free) and the executor that deletes it in order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ..snapshot import Snapshot
from .file_index import FileIndex
from .progress import Progress
from .results import CleanupResult
from .roots import Root, all_roots

if TYPE_CHECKING:
    from ..fileio import FileIO
    from ..table import Table

_DELETE_THREADS = 8
_STAT_AT_MOST = 16  # paths of one directory on an object store looked up one by one rather than listed


@dataclass
class Plan:
    data: dict[str, int | None]        # path -> size
    changelog: dict[str, int | None]
    metadata: dict[str, int | None]


def _root_key(s: Snapshot) -> tuple:
    return (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list, s.index_manifest, s.statistics)


def plan_removal(index: FileIndex, removed: Sequence[Snapshot], kept: Sequence[Snapshot],
          progress: Progress | None = None) -> Plan:
    kept_keys: dict[tuple, Snapshot] = {}
    for s in kept:
        kept_keys.setdefault(_root_key(s), s)
    # A removed root identical to a kept one (a tag of a retained snapshot, two tags of one snapshot) frees
    # nothing: skip it without reading anything.
    removed = [s for s in removed if _root_key(s) not in kept_keys]
    if not removed:
        return Plan({}, {}, {})
    unique = list(kept_keys.values())
    live_names = index.union_live_names(unique, progress)
    kept_meta: set[str] = set()
    for i, s in enumerate(unique):
        kept_meta.update(index.metadata(s, strict=True))
        if progress:
            progress("reading retained snapshots and tags", i + 1, len(unique))
    data: dict[str, int | None] = {}
    changelog: dict[str, int | None] = {}
    metadata: dict[str, int | None] = {}
    data_manifests: set[str] = set()
    changelog_manifests: set[str] = set()
    for s in removed:
        data_manifests.update(index.data_manifests(s, strict=False))
        changelog_manifests.update(index.changelog_manifests(s, strict=False))
        for path, size in index.metadata(s, strict=False).items():
            if path not in kept_meta:
                metadata[path] = size
    for names, target in ((data_manifests, data), (changelog_manifests, changelog)):
        for name in sorted(names):
            m = index.read_manifest(name, False)
            if m is None:
                continue
            for ref in m.refs.values():
                if ref.name not in live_names:
                    target[index.data_path(ref)] = ref.size
                for x, p in zip(ref.extras, index.extra_paths(ref)):
                    if x not in live_names:
                        target[p] = None
    for p in changelog:
        data.pop(p, None)
    return Plan(data, changelog, metadata)


def existing_sizes(io: FileIO, paths: Iterable[str]) -> dict[str, int]:
    """path -> size of those of `paths` that exist: a stat per path on a local disk (a directory such as
    manifest/ can hold tens of thousands of files) and for a few paths, else one listing per directory (on an
    object store a listing answers a thousand keys a request)."""
    by_dir: dict[str, list[str]] = {}
    for p in paths:
        d, _, _ = p.rpartition("/")
        by_dir.setdefault(d, []).append(p)
    out: dict[str, int] = {}
    for d, ps in by_dir.items():
        if io.local or len(ps) <= _STAT_AT_MOST:
            out.update(io.sizes(ps))
            continue
        listing = {i.path.rsplit("/", 1)[-1]: i.size for i in io.list_dir(d)}
        for p in ps:
            size = listing.get(p.rsplit("/", 1)[-1])
            if size is not None:
                out[p] = size
    return out


def remove_empty_dirs(io: FileIO, root: str, paths: list[str]) -> None:
    """Remove the directories of these deleted files, and their parents up to `root`, where they are empty."""
    dirs = {p.rsplit("/", 1)[0] for p in paths if p.startswith(root + "/")}
    for d in sorted(dirs, key=len, reverse=True):
        while d.startswith(root + "/") and d != root:
            before = io.exists(d)
            io.delete_dir_if_empty(d)
            if not before or io.exists(d):
                break
            d = d.rsplit("/", 1)[0]


class Executor:
    """Runs a plan: removed roots first, then a re-check, then data files, then metadata."""

    def __init__(self, table: "Table", result: CleanupResult, progress: Progress | None):
        self.table = table
        self.io = table.io
        self.result = result
        self.progress = progress

    def delete_files(self, paths: list[str], stage: str) -> None:
        if not paths:
            return
        total = len(paths)
        if total < 32:
            for i, p in enumerate(paths):
                self.io.delete(p)
                if self.progress:
                    self.progress(stage, i + 1, total)
            return
        done = 0
        with ThreadPoolExecutor(max_workers=_DELETE_THREADS) as pool:
            for _ in pool.map(self.io.delete, paths):
                done += 1
                if self.progress and (done % 64 == 0 or done == total):
                    self.progress(stage, done, total)

    def run_fileplan_removal(self, plan: Plan) -> None:
        data = existing_sizes(self.io, plan.data)
        changelog = existing_sizes(self.io, plan.changelog)
        metadata = existing_sizes(self.io, plan.metadata)
        self.result.data_files = sorted(data)
        self.result.changelog_files = sorted(changelog)
        self.result.bytes_freed += sum(data.values()) + sum(changelog.values()) + sum(metadata.values())
        if self.result.dry_run:
            self.result.metadata_files += sorted(metadata)
            return
        self.delete_files(sorted(data) + sorted(changelog), "deleting data files")
        remove_empty_dirs(self.io, self.table.path, list(data) + list(changelog))
        # Manifests before the manifest lists that name them; index files before their index manifests.
        manifest_dir = f"{self.table.path}/manifest/"
        names = sorted(metadata)
        manifests = [p for p in names if p.startswith(manifest_dir) and "manifest-list-" not in p
                     and "index-manifest-" not in p]
        lists = [p for p in names if p.startswith(manifest_dir) and "manifest-list-" in p]
        rest = [p for p in names if p not in set(manifests) | set(lists)]
        index_manifests = [p for p in rest if p.startswith(manifest_dir)]
        others = [p for p in rest if not p.startswith(manifest_dir)]
        for group in (manifests, lists, others, index_manifests):
            self.delete_files(group, "deleting metadata files")
        self.result.metadata_files += manifests + lists + others + index_manifests

def _replan_if_new_roots(table: "Table", index: FileIndex, removed: list[Snapshot], kept: list[Root],
                         plan: Plan, removed_keys: set[tuple]) -> Plan:
    """After the removed roots are gone: roots created meanwhile (a concurrent tag, commit or rollback) join the
    live set before any file is deleted."""
    known = {r.key for r in kept} | removed_keys
    now = all_roots(table)
    fresh = [r for r in now if r.key not in known]
    if not fresh:
        return plan
    return plan_removal(index, removed, [r.snapshot for r in kept + fresh])


def remove_roots_and_files(table: "Table", result: CleanupResult, removed: list[Root], kept: list[Root],
                            delete_root_files: Callable[[], None], progress: Progress | None,
                            index: FileIndex | None = None) -> CleanupResult:
    index = index or FileIndex(table)
    removed_snaps = [r.snapshot for r in removed]
    plan = plan_removal(index, removed_snaps, [r.snapshot for r in kept], progress)
    executor = Executor(table, result, progress)
    if result.dry_run:
        executor.run_fileplan_removal(plan)
        return result
    delete_root_files()
    if plan.data or plan.changelog or plan.metadata:  # a new root can only take files off the plan
        plan = _replan_if_new_roots(table, index, removed_snaps, kept, plan, {r.key for r in removed})
    executor.run_fileplan_removal(plan)
    return result
