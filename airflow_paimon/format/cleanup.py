"""Deleting what nothing live needs: snapshot expiry, tag deletion and expiry, rollback and orphan-file removal.

Every operation here follows one plan, stricter than Paimon's neighbour-based skipping sets:

1. **Roots.** The table's roots are its snapshot files, its tag files and its long-lived changelog files. An
   operation removes some roots (expired snapshots, deleted tags, rolled-back snapshots) and keeps the rest.
2. **Live set.** From *every* kept root: the data files it reads (its manifests merged: ADD minus DELETE), its
   changelog files, and its metadata (manifest lists, manifests, index manifest and index files, statistics).
   Manifests are immutable, so each is read once per operation (cached by file name), and the union over all
   roots is one pass over the distinct manifests with a bit per root (not roots x files).
3. **Candidates.** Every file the removed roots mention (data, extra, changelog and metadata files), minus the
   live set. Data files are compared by file name (Paimon names them with UUIDs), so a file a kept root reads
   under any path is never deleted.
4. **Order.** Inputs are checked and the plan is computed before anything is touched. Then the removed root
   files go first (expiry: snapshots oldest first; rollback: newer tags, then newer snapshots newest first),
   so nothing can reach the candidates any more; the live set is re-checked against roots that appeared
   meanwhile; only then are data and changelog files deleted, then manifests, then manifest lists and
   index/statistics files. A crash at any point leaves at worst unreferenced files (removed later by
   `remove_orphan_files`), never a retained snapshot or tag that points at a deleted file.

`dry_run=True` computes the same plan and deletes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Sequence

from .errors import InvalidOptionError, PaimonError, SnapshotNotFoundError, UnsupportedTableError
from .manifest import ADD, ManifestFileMeta
from .snapshot import Snapshot, read_snapshot_file
from .tags import Tag, local_now, same_snapshot, to_local_naive

if TYPE_CHECKING:
    from .table import Table

Progress = Callable[[str, int, int], None]
DEFAULT_ORPHAN_AGE = dt.timedelta(days=1)
_DELETE_THREADS = 8


# ---------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------

@dataclass
class CleanupResult:
    """What an upkeep operation deleted (or, with dry_run, would delete)."""

    operation: str
    dry_run: bool
    snapshots: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    changelog_files: list[str] = field(default_factory=list)
    metadata_files: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    restored_snapshot: int | None = None
    rolled_back_to: int | None = None

    @property
    def files(self) -> list[str]:
        """Every file deleted: data, changelog and metadata files (snapshot and tag files included)."""
        return self.data_files + self.changelog_files + self.metadata_files

    @property
    def snapshots_expired(self) -> int:
        return len(self.snapshots)

    @property
    def files_freed(self) -> int:
        return len(self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "dry_run": self.dry_run,
            "snapshots": list(self.snapshots),
            "tags": list(self.tags),
            "data_files": list(self.data_files),
            "changelog_files": list(self.changelog_files),
            "metadata_files": list(self.metadata_files),
            "files_freed": self.files_freed,
            "bytes_freed": self.bytes_freed,
            "restored_snapshot": self.restored_snapshot,
            "rolled_back_to": self.rolled_back_to,
        }

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        parts = []
        if self.snapshots:
            parts.append(f"{len(self.snapshots)} snapshot(s) {_ranges(self.snapshots)}")
        if self.tags:
            parts.append(f"{len(self.tags)} tag(s) {', '.join(repr(t) for t in self.tags)}")
        parts.append(f"{len(self.data_files)} data file(s), {len(self.changelog_files)} changelog file(s), "
                     f"{len(self.metadata_files)} metadata file(s), {human_bytes(self.bytes_freed)}")
        text = f"{self.operation}: {verb} " + "; ".join(parts)
        if self.rolled_back_to is not None:
            text += f"; latest snapshot is now {self.rolled_back_to}"
        if self.restored_snapshot is not None:
            text += " (restored from its tag)"
        return text


ExpireResult = CleanupResult


@dataclass
class OrphanFile:
    path: str
    size: int
    mtime_ms: int


@dataclass
class OrphanResult:
    dry_run: bool
    older_than_ms: int
    files: list[OrphanFile] = field(default_factory=list)
    scanned: int = 0

    @property
    def bytes_freed(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": "remove-orphan-files",
            "dry_run": self.dry_run,
            "older_than": dt.datetime.fromtimestamp(self.older_than_ms / 1000, dt.timezone.utc).isoformat(),
            "scanned": self.scanned,
            "files": [{"path": f.path, "size": f.size,
                       "modified": dt.datetime.fromtimestamp(f.mtime_ms / 1000, dt.timezone.utc).isoformat()}
                      for f in self.files],
            "files_freed": len(self.files),
            "bytes_freed": self.bytes_freed,
        }

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"remove-orphan-files: scanned {self.scanned} file(s), {verb} {len(self.files)} orphan file(s), "
                f"{human_bytes(self.bytes_freed)}")


def human_bytes(n: int | None) -> str:
    """`n` bytes for people: ``512 B``, ``3.4 MiB``; empty for an unknown size."""
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _ranges(ids: Sequence[int]) -> str:
    ids = sorted(ids)
    out, start, prev = [], None, None
    for i in ids:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = prev = i
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}..{prev}")
    return ", ".join(out)


# ---------------------------------------------------------------------------------------------------------
# What a root references (cached by immutable file name)
# ---------------------------------------------------------------------------------------------------------

class FileRef(NamedTuple):
    partition: bytes
    bucket: int
    name: str
    size: int
    extras: tuple
    external: str | None


class _Manifest(NamedTuple):
    refs: dict          # identifier (partition, bucket, level, name) -> FileRef, ADD and DELETE entries
    adds: dict          # identifier -> FileRef of ADD entries
    deletes: frozenset  # identifiers of DELETE entries
    names: frozenset    # every data / extra file name mentioned


class FileIndex:
    """Reads manifests once and answers: what does a snapshot (or tag) read, mention and keep alive."""

    def __init__(self, table: "Table"):
        self.table = table
        self.io = table.io
        self.manifest_dir = f"{table.path}/manifest"
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._manifests: dict[str, _Manifest] = {}
        self._index: dict[str, list[tuple[str, int | None, str | None]]] = {}
        self._live: dict[tuple, dict] = {}
        self._pdirs: dict[bytes, str] = {}

    # ---- raw reads -------------------------------------------------------------------------------------
    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        got = self._lists.get(name)
        if got is None:
            got = self._lists[name] = self.table.manifest_io.read_list(name)
        return got

    def manifest(self, name: str) -> _Manifest:
        got = self._manifests.get(name)
        if got is not None:
            return got
        refs: dict = {}
        adds: dict = {}
        deletes = set()
        names = set()
        for r in self.table.manifest_io.read_records(name):
            f = r["_FILE"]
            fname = f["_FILE_NAME"]
            extras = tuple(f.get("_EXTRA_FILES") or ())
            ref = FileRef(r["_PARTITION"], r["_BUCKET"], fname, f["_FILE_SIZE"], extras, f.get("_EXTERNAL_PATH"))
            ident = (r["_PARTITION"], r["_BUCKET"], f["_LEVEL"], fname)
            refs[ident] = ref
            if r["_KIND"] == ADD:
                adds[ident] = ref
            else:
                deletes.add(ident)
            names.add(fname)
            if extras:
                names.update(extras)
        got = self._manifests[name] = _Manifest(refs, adds, frozenset(deletes), frozenset(names))
        return got

    def index_files(self, index_manifest: str) -> list[tuple[str, int | None, str | None]]:
        got = self._index.get(index_manifest)
        if got is None:
            got = [(r.get("_FILE_NAME"), r.get("_FILE_SIZE"), r.get("_EXTERNAL_PATH"))
                   for r in self.table.manifest_io.read_records(index_manifest, "index manifest")
                   if r.get("_FILE_NAME")]
            self._index[index_manifest] = got
        return got

    # ---- per snapshot -----------------------------------------------------------------------------------
    def data_manifests(self, snap: Snapshot, strict: bool = True) -> list[str]:
        out: list[str] = []
        for lst in (snap.base_manifest_list, snap.delta_manifest_list):
            if lst:
                out += [m.file_name for m in self._read_list(lst, strict)]
        return out

    def changelog_manifests(self, snap: Snapshot, strict: bool = True) -> list[str]:
        if not snap.changelog_manifest_list:
            return []
        return [m.file_name for m in self._read_list(snap.changelog_manifest_list, strict)]

    def _read_list(self, name: str, strict: bool) -> list[ManifestFileMeta]:
        try:
            return self.manifest_list(name)
        except FileNotFoundError:
            if strict:
                raise PaimonError(
                    f"manifest list {name} of a retained snapshot or tag is missing; refusing to delete "
                    "anything (the live set cannot be computed)") from None
            return []

    def _read_manifest(self, name: str, strict: bool) -> _Manifest | None:
        try:
            return self.manifest(name)
        except FileNotFoundError:
            if strict:
                raise PaimonError(
                    f"manifest {name} of a retained snapshot or tag is missing; refusing to delete anything "
                    "(the live set cannot be computed)") from None
            return None

    def live(self, snap: Snapshot) -> dict:
        """identifier -> FileRef of the data files a read of `snap` uses (ADD minus DELETE)."""
        key = (snap.base_manifest_list, snap.delta_manifest_list)
        got = self._live.get(key)
        if got is not None:
            return got
        adds: dict = {}
        deletes: set = set()
        for name in self.data_manifests(snap):
            m = self._read_manifest(name, True)
            adds.update(m.adds)
            deletes |= m.deletes
        for ident in deletes & adds.keys():
            del adds[ident]
        self._live[key] = adds
        return adds

    def union_live_names(self, snaps: Sequence[Snapshot], progress: Progress | None = None) -> set[str]:
        """Names of every data, extra and changelog file that a read of any of `snaps` uses.

        Exact, and linear in the distinct manifests rather than in snapshots x files: each root gets a bit; a
        manifest carries the bits of the roots that list it; a file is live in some root when the roots of the
        manifests adding it are not all among the roots of the manifests deleting it (Paimon adds and deletes
        each file at most once, so within one root ADD minus DELETE is exactly its file set).
        """
        roots_of: dict[str, int] = {}
        changelogs: set[str] = set()
        for i, s in enumerate(snaps):
            bit = 1 << i
            for name in self.data_manifests(s):
                roots_of[name] = roots_of.get(name, 0) | bit
            changelogs.update(self.changelog_manifests(s))
        added: dict = {}
        deleted: dict = {}
        refs: dict = {}
        total = len(roots_of)
        for n, (name, bits) in enumerate(roots_of.items()):
            m = self._read_manifest(name, True)
            for ident, ref in m.adds.items():
                added[ident] = added.get(ident, 0) | bits
                refs[ident] = ref
            for ident in m.deletes:
                deleted[ident] = deleted.get(ident, 0) | bits
            if progress and (n % 50 == 0 or n + 1 == total):
                progress("reading manifests", n + 1, total)
        out: set[str] = set()
        for ident, bits in added.items():
            if bits & ~deleted.get(ident, 0):
                ref = refs[ident]
                out.add(ref.name)
                if ref.extras:
                    out.update(ref.extras)
        for name in changelogs:
            out |= self._read_manifest(name, True).names
        return out

    def metadata(self, snap: Snapshot, strict: bool = True) -> dict[str, int | None]:
        """path -> size (None: unknown) of the metadata files `snap` references."""
        out: dict[str, int | None] = {}
        lists = [(snap.base_manifest_list, snap.base_manifest_list_size),
                 (snap.delta_manifest_list, snap.delta_manifest_list_size),
                 (snap.changelog_manifest_list, snap.changelog_manifest_list_size)]
        for lst, size in lists:
            if not lst:
                continue
            out[f"{self.manifest_dir}/{lst}"] = size
            for m in self._read_list(lst, strict):
                out[f"{self.manifest_dir}/{m.file_name}"] = m.file_size
        if snap.index_manifest:
            out[f"{self.manifest_dir}/{snap.index_manifest}"] = None
            try:
                files = self.index_files(snap.index_manifest)
            except FileNotFoundError:
                if strict:
                    raise PaimonError(f"index manifest {snap.index_manifest} of a retained snapshot or tag is "
                                      "missing; refusing to delete anything") from None
                files = []
            for name, size, external in files:
                out[external or f"{self.table.path}/index/{name}"] = size
        if snap.statistics:
            out[f"{self.table.path}/statistics/{snap.statistics}"] = None
        return out

    def data_path(self, ref: FileRef) -> str:
        if ref.external:
            return ref.external
        pdir = self._pdirs.get(ref.partition)
        if pdir is None:
            codec = self.table.partition_codec
            pdir = self._pdirs[ref.partition] = codec.path(codec.from_bytes(ref.partition))
        return f"{self.table.path}/{pdir}bucket-{ref.bucket}/{ref.name}"

    def extra_paths(self, ref: FileRef) -> list[str]:
        base = self.data_path(ref).rsplit("/", 1)[0]
        return [f"{base}/{x}" for x in ref.extras]


# ---------------------------------------------------------------------------------------------------------
# Roots
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Root:
    kind: str      # "snapshot", "tag" or "changelog"
    name: str      # the snapshot / changelog id, or the tag name
    snapshot: Snapshot

    @property
    def key(self) -> tuple:
        return (self.kind, self.name, self.snapshot.base_manifest_list, self.snapshot.delta_manifest_list)


def _check_supported(table: "Table") -> None:
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


# ---------------------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------------------

@dataclass
class _Plan:
    data: dict[str, int | None]        # path -> size
    changelog: dict[str, int | None]
    metadata: dict[str, int | None]


def _root_key(s: Snapshot) -> tuple:
    return (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list, s.index_manifest, s.statistics)


def _plan(index: FileIndex, removed: Sequence[Snapshot], kept: Sequence[Snapshot],
          progress: Progress | None = None) -> _Plan:
    kept_keys: dict[tuple, Snapshot] = {}
    for s in kept:
        kept_keys.setdefault(_root_key(s), s)
    # A removed root identical to a kept one (a tag of a retained snapshot, two tags of one snapshot) frees
    # nothing: skip it without reading anything.
    removed = [s for s in removed if _root_key(s) not in kept_keys]
    if not removed:
        return _Plan({}, {}, {})
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
            m = index._read_manifest(name, False)
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
    return _Plan(data, changelog, metadata)


def _existing(io, paths: Iterable[str]) -> dict[str, int]:
    """path -> size of those of `paths` that exist (one listing per directory)."""
    by_dir: dict[str, list[str]] = {}
    for p in paths:
        d, _, _ = p.rpartition("/")
        by_dir.setdefault(d, []).append(p)
    out: dict[str, int] = {}
    for d, ps in by_dir.items():
        listing = {i.path.rsplit("/", 1)[-1]: i.size for i in io.list_dir(d)}
        for p in ps:
            size = listing.get(p.rsplit("/", 1)[-1])
            if size is not None:
                out[p] = size
    return out


class _Executor:
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

    def run_file_plan(self, plan: _Plan) -> None:
        data = _existing(self.io, plan.data)
        changelog = _existing(self.io, plan.changelog)
        metadata = _existing(self.io, plan.metadata)
        self.result.data_files = sorted(data)
        self.result.changelog_files = sorted(changelog)
        self.result.bytes_freed += sum(data.values()) + sum(changelog.values()) + sum(metadata.values())
        if self.result.dry_run:
            self.result.metadata_files += sorted(metadata)
            return
        self.delete_files(sorted(data) + sorted(changelog), "deleting data files")
        self._remove_empty_dirs(list(data) + list(changelog))
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

    def _remove_empty_dirs(self, paths: list[str]) -> None:
        root = self.table.path
        dirs = {p.rsplit("/", 1)[0] for p in paths if p.startswith(root + "/")}
        for d in sorted(dirs, key=len, reverse=True):
            while d.startswith(root + "/") and d != root:
                before = self.io.exists(d)
                self.io.delete_dir_if_empty(d)
                if not before or self.io.exists(d):
                    break
                d = d.rsplit("/", 1)[0]


def _replan_if_new_roots(table: "Table", index: FileIndex, removed: list[Snapshot], kept: list[Root],
                         plan: _Plan, removed_keys: set[tuple]) -> _Plan:
    """After the removed roots are gone: roots created meanwhile (a concurrent tag, commit or rollback) join the
    live set before any file is deleted."""
    known = {r.key for r in kept} | removed_keys
    now = all_roots(table)
    fresh = [r for r in now if r.key not in known]
    if not fresh:
        return plan
    return _plan(index, removed, [r.snapshot for r in kept + fresh])


def _remove_roots_and_files(table: "Table", result: CleanupResult, removed: list[Root], kept: list[Root],
                            delete_root_files: Callable[[], None], progress: Progress | None,
                            index: FileIndex | None = None) -> CleanupResult:
    index = index or FileIndex(table)
    removed_snaps = [r.snapshot for r in removed]
    plan = _plan(index, removed_snaps, [r.snapshot for r in kept], progress)
    executor = _Executor(table, result, progress)
    if result.dry_run:
        executor.run_file_plan(plan)
        return result
    delete_root_files()
    if plan.data or plan.changelog or plan.metadata:  # a new root can only take files off the plan
        plan = _replan_if_new_roots(table, index, removed_snaps, kept, plan, {r.key for r in removed})
    executor.run_file_plan(plan)
    return result


# ---------------------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------------------

def _count_arg(value: Any, name: str, default: int, minimum: int = 1) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        number = int(value)
    else:
        number = None
    if number is None:
        raise InvalidOptionError(f"{name} must be a whole number, not {value!r}")
    if number < minimum:
        raise InvalidOptionError(f"{name} must be at least {minimum}, not {number}")
    return number


def _millis(value: Any, name: str) -> int:
    from .table import to_epoch_millis
    try:
        return to_epoch_millis(value)
    except (PaimonError, ValueError, TypeError, OverflowError):
        raise InvalidOptionError(
            f"{name}: {value!r} is not a point in time (ISO 8601 such as '2026-11-20' or "
            "'2026-11-20 02:00:00+01:00', a datetime, or epoch milliseconds)") from None


def _now_ms(now: Any) -> int:
    return int(time.time() * 1000) if now is None else _millis(now, "now")


# ---------------------------------------------------------------------------------------------------------
# Expire snapshots
# ---------------------------------------------------------------------------------------------------------

def _consumer_min_next(table: "Table") -> int | None:
    lowest = None
    for info in table.io.list_dir(f"{table.path}/consumer"):
        name = info.path.rsplit("/", 1)[-1]
        if not name.startswith("consumer-"):
            continue
        try:
            nxt = json.loads(table.io.read_text(info.path)).get("nextSnapshot")
        except (FileNotFoundError, ValueError):
            continue
        if isinstance(nxt, int) and (lowest is None or nxt < lowest):
            lowest = nxt
    return lowest


def expire_snapshots(table: "Table", retain_min: int | None = None, retain_max: int | None = None,
                     older_than: Any = None, max_deletes: int | None = None, dry_run: bool = False,
                     now: Any = None, progress: Progress | None = None) -> CleanupResult:
    """Expire the oldest snapshots as Paimon does (same options, same defaults), deleting only what no
    retained snapshot and no tag uses.

    Snapshot k may expire when: more than `retain_min` snapshots are newer or equal to it stay (at least the
    `retain_min` newest are kept), no consumer still reads it, it is among the `max_deletes` oldest, and the
    snapshot after it was committed before `older_than` (default: now - `snapshot.time-retained`); snapshots
    beyond the `retain_max` newest expire regardless of their age. `older_than` is a point in time (or a
    timedelta, meaning that long before now).
    """
    opts = table.core_options
    rmin = _count_arg(retain_min, "retain_min", opts.snapshot_num_retained_min)
    rmax = _count_arg(retain_max, "retain_max", opts.snapshot_num_retained_max)
    if rmax < rmin:
        raise InvalidOptionError(f"retain_max ({rmax}) must not be less than retain_min ({rmin})")
    limit = _count_arg(max_deletes, "max_deletes", opts.snapshot_expire_limit)
    now_ms = _now_ms(now)
    if older_than is None:
        threshold = now_ms - int(opts.snapshot_time_retained.total_seconds() * 1000)
    elif isinstance(older_than, dt.timedelta):
        if older_than < dt.timedelta(0):
            raise InvalidOptionError(f"older_than: a retention must not be negative, got {older_than}")
        threshold = now_ms - int(older_than.total_seconds() * 1000)
    else:
        threshold = _millis(older_than, "older_than")
    _check_supported(table)
    decoupled = sorted(k for k in ("changelog.num-retained.min", "changelog.num-retained.max",
                                   "changelog.time-retained") if k in table.options())
    if decoupled:
        raise UnsupportedTableError(
            f"{table.identifier} keeps its changelog longer than its snapshots ({', '.join(decoupled)}); expiring "
            "such tables (Paimon's decoupled changelog files) is not supported here: use Paimon's expire procedure")

    result = CleanupResult("expire-snapshots", dry_run)
    sm = table.snapshot_manager
    ids = sm.ids()
    if not ids:
        return result
    earliest, latest = ids[0], ids[-1]
    keep_from = max(latest - rmax + 1, earliest)
    end = latest - rmin + 1
    consumer = _consumer_min_next(table)
    if consumer is not None:
        end = min(end, consumer)
    end = min(end, earliest + limit)
    stop = end
    present = set(ids)
    for sid in range(keep_from, end):
        if sid + 1 in present and threshold <= sm.snapshot(sid + 1).time_millis:
            stop = sid
            break
    expired = [sid for sid in ids if sid < stop]
    if not expired:
        return result
    kept_snaps = [r for r in snapshot_roots(table) if int(r.name) >= stop]
    if not kept_snaps:
        return result  # never expire the last snapshot
    removed = [Root("snapshot", str(sid), sm.snapshot(sid)) for sid in expired]
    kept = kept_snaps + tag_roots(table) + changelog_roots(table)
    result.snapshots = expired
    snapshot_files = _existing(table.io, [sm.path(s) for s in expired])
    result.metadata_files = sorted(snapshot_files, key=lambda p: int(p.rsplit("-", 1)[1]))
    result.bytes_freed = sum(snapshot_files.values())

    def delete_snapshot_files() -> None:
        sm.earliest_hint(int(kept_snaps[0].name))
        for i, sid in enumerate(expired):  # oldest first: the retained range stays contiguous
            table.io.delete(sm.path(sid))
            sm.forget(sid)
            if progress:
                progress("deleting expired snapshots", i + 1, len(expired))

    return _remove_roots_and_files(table, result, removed, kept, delete_snapshot_files, progress)


# ---------------------------------------------------------------------------------------------------------
# Tags
# ---------------------------------------------------------------------------------------------------------

def delete_tags(table: "Table", tags: Sequence[Tag], dry_run: bool = False, operation: str = "delete-tag",
                progress: Progress | None = None) -> CleanupResult:
    """Delete these tags and the files only they used."""
    _check_supported(table)
    result = CleanupResult(operation, dry_run)
    if not tags:
        return result
    names = {t.name for t in tags}
    removed = [Root("tag", t.name, t.snapshot) for t in tags]
    sm = table.snapshot_manager
    if all(sm.exists(t.snapshot.id) and same_snapshot(_try_snapshot(sm, t.snapshot.id), t.snapshot) for t in tags):
        # Every tag marks a retained snapshot: they hold no file of their own (Paimon's shortcut, checked
        # against the snapshot's content rather than its id only).
        kept = [Root("snapshot", str(t.snapshot.id), t.snapshot) for t in tags]
    else:
        kept = snapshot_roots(table) + [r for r in tag_roots(table) if r.name not in names] + \
            changelog_roots(table)
    tm = table.tags
    tag_files = _existing(table.io, [tm.path(n) for n in sorted(names)])
    result.tags = sorted(names)
    result.metadata_files = sorted(tag_files)
    result.bytes_freed = sum(tag_files.values())

    def delete_tag_files() -> None:
        for n in sorted(names):
            table.io.delete(tm.path(n))

    return _remove_roots_and_files(table, result, removed, kept, delete_tag_files, progress)


def _try_snapshot(sm, snapshot_id: int) -> Snapshot:
    try:
        return sm.snapshot(snapshot_id)
    except (SnapshotNotFoundError, ValueError):
        return Snapshot(-1, -1, "", "", "", -1, "", -1)


def cleanup_after_tag_replace(table: "Table", old: Tag) -> CleanupResult:
    """The tag file now points elsewhere: delete what only its old snapshot used."""
    result = CleanupResult("replace-tag", False)
    try:
        _check_supported(table)
    except UnsupportedTableError:
        return result  # branches may share the old files: keep them
    kept = all_roots(table)
    if any(same_snapshot(r.snapshot, old.snapshot) for r in kept):
        return result
    return _remove_roots_and_files(table, result, [Root("tag", old.name, old.snapshot)], kept, lambda: None, None)


def tags_to_expire(table: "Table", now: Any = None) -> list[tuple[Tag, str]]:
    """(tag, reason) for tags whose retention ran out and for the oldest periodic tags beyond
    `tag.num-retained-max` (periodic: named by the table's period formatter, see periods.py; on a table Paimon
    auto-tags, its auto tags on the oldest snapshots, see auto_tags.py)."""
    from .auto_tags import AutoTagRule, retained_max_surplus
    from .periods import PeriodSpec
    options = table.options()
    auto = AutoTagRule.from_options(options)
    spec = PeriodSpec.from_options(options) if auto is None else None
    now_local = local_now() if now is None else to_local_naive(now)
    out: list[tuple[Tag, str]] = []
    remaining: list[Tag] = []
    tags = table.tags.list()
    for tag in tags:
        expires = tag.expires_at
        if expires is not None and now_local > expires:
            out.append((tag, f"retention {tag.time_retained} ran out at {expires.isoformat(sep=' ')}"))
        else:
            remaining.append(tag)
    if auto is not None:
        # Paimon counts before it expires by time (TagAutoManager runs creation, then TagTimeExpire).
        timed_out = {t.name for t, _ in out}
        for tag in retained_max_surplus(auto, tags):
            if tag.name not in timed_out:
                out.append((tag, f"more than tag.num-retained-max = {auto.num_retained_max} auto-created tags"))
    elif spec.num_retained_max is not None:
        periodic = []
        for tag in remaining:
            period = spec.parse_tag_name(tag.name)
            if period is not None:
                periodic.append((period.start, tag))
        periodic.sort(key=lambda p: p[0])
        surplus = len(periodic) - spec.num_retained_max
        for _, tag in periodic[:max(surplus, 0)]:
            out.append((tag, f"more than tag.num-retained-max = {spec.num_retained_max} periodic tags"))
    return out


def expire_tags(table: "Table", now: Any = None, dry_run: bool = False,
                progress: Progress | None = None) -> CleanupResult:
    expiring = tags_to_expire(table, now)
    _check_supported(table)
    return delete_tags(table, [t for t, _ in expiring], dry_run, "expire-tags", progress)


# ---------------------------------------------------------------------------------------------------------
# Rollback
# ---------------------------------------------------------------------------------------------------------

def _rollback_to_snapshot(table: "Table", value: Any) -> tuple[Snapshot, Tag | None]:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or \
            isinstance(value, str) and not value.strip().isdigit():
        raise InvalidOptionError(f"to_snapshot must be a snapshot id (a whole number), not {value!r}")
    snapshot_id = int(value)
    if snapshot_id < 1:
        raise InvalidOptionError(f"to_snapshot must be at least 1, not {snapshot_id}")
    sm = table.snapshot_manager
    try:
        return sm.snapshot(snapshot_id), None
    except SnapshotNotFoundError:
        for tag in table.tags.list():
            if tag.snapshot.id == snapshot_id:
                return tag.snapshot, tag
        ids = sm.ids()
        held = f" (retained: {ids[0]}..{ids[-1]})" if ids else ""
        raise SnapshotNotFoundError(
            f"cannot roll {table.identifier} back to snapshot {snapshot_id}: it does not exist{held} and no tag "
            "holds it") from None


def _rollback_to_time(table: "Table", value: Any, now: Any) -> tuple[Snapshot, Tag | None]:
    from .time_travel import snapshot_at, utc_text
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidOptionError(f"to_time must be a point in time, not {value!r}")
    millis = _millis(value, "to_time")
    now_ms = _now_ms(now)
    if millis > now_ms:
        raise InvalidOptionError(
            f"to_time {utc_text(millis)} is in the future (now: {utc_text(now_ms)}); give a past time, or "
            "to_snapshot/to_tag")
    found = snapshot_at(table, millis, alternative="roll back to that tag by name (to_tag, --tag) if its state is "
                                                   "the one you want")
    return found.snapshot, table.tags.get(found.tag) if found.tag is not None else None


def _resolve_rollback_target(table: "Table", to_tag: Any, to_snapshot: Any, to_time: Any,
                             now: Any) -> tuple[Snapshot, Tag | None]:
    """Exactly one explicit target: a tag is never taken for a time, nor a time for a tag."""
    given = [n for n, v in (("to_tag", to_tag), ("to_snapshot", to_snapshot), ("to_time", to_time)) if v is not None]
    if len(given) != 1:
        raise InvalidOptionError(
            "give exactly one rollback target: to_tag (a tag name), to_snapshot (a snapshot id) or to_time "
            f"(a point in time); got {', '.join(given) if given else 'none'}")
    if to_tag is not None:
        name = to_tag.name if isinstance(to_tag, Tag) else to_tag
        if not isinstance(name, str) or not name.strip():
            raise InvalidOptionError(f"to_tag must be a tag name, not {to_tag!r}")
        tag = table.tags.get(name)
        return tag.snapshot, tag
    if to_snapshot is not None:
        return _rollback_to_snapshot(table, to_snapshot)
    return _rollback_to_time(table, to_time, now)


def rollback(table: "Table", to_tag: Any = None, to_snapshot: Any = None, to_time: Any = None,
             dry_run: bool = False, progress: Progress | None = None, now: Any = None) -> CleanupResult:
    """Make the snapshot of a tag, a snapshot id or a point in time the latest again.

    Newer snapshots and newer tags are deleted, with the files only they used. A tag whose snapshot expired is
    written back as that snapshot (as Paimon does). A time is resolved exactly (see time_travel.py): when the
    snapshot current then has expired and no tag provably holds it, the rollback is refused, since rolling back
    to an older tag would also remove commits made after it that the caller did not name.
    """
    target, via_tag = _resolve_rollback_target(table, to_tag, to_snapshot, to_time, now)
    _check_supported(table)
    sm = table.snapshot_manager
    tm = table.tags
    result = CleanupResult("rollback", dry_run, rolled_back_to=target.id)
    snaps = snapshot_roots(table)
    existing = {int(r.name): r.snapshot for r in snaps}
    restore = False
    if target.id in existing:
        if not same_snapshot(existing[target.id], target):
            raise PaimonError(
                f"snapshot {target.id} of {table.identifier} is not the snapshot tag {via_tag.name!r} holds "
                "(the table was rolled back and re-committed since); roll back to the snapshot id instead")
    else:
        restore = True
        result.restored_snapshot = target.id
    newer = sorted((r for r in snaps if int(r.name) > target.id), key=lambda r: -int(r.name))
    tags = tag_roots(table)
    newer_tags = [r for r in tags if r.snapshot.id > target.id]
    removed = newer + newer_tags
    kept = [r for r in snaps if int(r.name) <= target.id] + [r for r in tags if r.snapshot.id <= target.id] + \
        changelog_roots(table)
    if restore:
        kept.append(Root("snapshot", str(target.id), target))
    result.snapshots = [int(r.name) for r in newer]
    result.tags = sorted(r.name for r in newer_tags)
    root_files = _existing(table.io, [sm.path(int(r.name)) for r in newer] + [tm.path(r.name) for r in newer_tags])
    result.metadata_files = [p for p in [sm.path(int(r.name)) for r in newer] +
                             [tm.path(r.name) for r in newer_tags] if p in root_files]
    result.bytes_freed = sum(root_files.values())

    def delete_roots() -> None:
        # 1. Newer tags first: once newer snapshots go, their ids may be committed again, and a surviving tag
        #    with such an id would not be the snapshot of that id any more.
        for r in newer_tags:
            table.io.delete(tm.path(r.name))
        # 2. A tag whose snapshot expired is written back as that snapshot. The hints are left alone until the
        #    end, so while newer snapshots exist they stay the latest (a crash here leaves the pre-rollback
        #    table plus one restored old snapshot, never a table without snapshots).
        if restore:
            from .tags import replace_extra
            snap = replace_extra(target)
            if not sm.create_snapshot(snap):
                current = Snapshot.from_json(table.io.read_text(sm.path(target.id)))
                if not same_snapshot(current, snap):
                    raise PaimonError(f"snapshot {target.id} appeared concurrently; rollback stopped before "
                                      "deleting any snapshot")
            sm.forget(target.id)
        # 3. Newer snapshots, newest first: a crash leaves a shorter, consistent history.
        for i, r in enumerate(newer):
            table.io.delete(sm.path(int(r.name)))
            sm.forget(int(r.name))
            if progress:
                progress("deleting newer snapshots", i + 1, len(newer))
        sm.commit_hint(target.id)
        remaining = sm.ids()
        if remaining and remaining[0] == target.id:
            sm.earliest_hint(target.id)

    return _remove_roots_and_files(table, result, removed, kept, delete_roots, progress)


# ---------------------------------------------------------------------------------------------------------
# Orphan files
# ---------------------------------------------------------------------------------------------------------

_DATA_TOP_SKIP = {"schema", "branch", "consumer", "service", "snapshot", "tag", "changelog", "manifest", "index",
                  "statistics"}


def referenced_names(table: "Table", roots: Sequence[Root] | None = None,
                     index: FileIndex | None = None) -> set[str]:
    """Every file name a snapshot, tag or changelog of the table references, as Paimon's orphan cleanup counts
    them: metadata files, and every data, extra and changelog file any of their manifests mentions."""
    index = index or FileIndex(table)
    roots = all_roots(table) if roots is None else roots
    names: set[str] = set()
    manifests: set[str] = set()
    for r in roots:
        s = r.snapshot
        try:
            meta = index.metadata(s, strict=True)
            manifests.update(index.data_manifests(s, strict=True))
            manifests.update(index.changelog_manifests(s, strict=True))
        except PaimonError:
            if _root_still_exists(table, r):
                raise
            continue  # removed concurrently (expiry, tag deletion): whatever it referenced may go
        names.update(p.rsplit("/", 1)[-1] for p in meta)
    for m in manifests:
        names |= index._read_manifest(m, True).names
    return names


def _root_still_exists(table: "Table", root: Root) -> bool:
    if root.kind == "snapshot":
        return table.snapshot_manager.exists(int(root.name))
    if root.kind == "tag":
        return table.io.exists(f"{table.path}/tag/tag-{root.name}")
    return table.io.exists(f"{table.path}/changelog/changelog-{root.name}")


def _orphan_candidate(rel: str, partition_depth: int) -> bool:
    """Whether a file at this table-relative path is one orphan cleanup may judge (never schema/, hints,
    snapshot/tag/changelog files themselves, consumers or branches)."""
    parts = rel.split("/")
    top, name = parts[0], parts[-1]
    if len(parts) == 1:
        return False
    if top in ("schema", "branch", "consumer", "service"):
        return False
    if top == "snapshot":
        return len(parts) == 2 and not (name.startswith("snapshot-") or name in ("EARLIEST", "LATEST"))
    if top == "tag":
        return len(parts) == 2 and not name.startswith("tag-")
    if top == "changelog":
        return len(parts) == 2 and not (name.startswith("changelog-") or name in ("EARLIEST", "LATEST"))
    if top in ("manifest", "index", "statistics"):
        return len(parts) == 2
    # data: [k=v/...]bucket-N/<file>
    if len(parts) != partition_depth + 2:
        return False
    if not parts[-2].startswith("bucket-"):
        return False
    return all("=" in p for p in parts[:-2])


def remove_orphan_files(table: "Table", older_than: Any = None, dry_run: bool = False, now: Any = None,
                        progress: Progress | None = None) -> OrphanResult:
    """Delete files under the table directory that nothing references and that are older than `older_than`
    (default: one day before now). Never touches schema/, snapshot and tag files, hints, consumers, branches,
    or anything newer than the safety age."""
    now_ms = _now_ms(now)
    if older_than is None:
        threshold = now_ms - int(DEFAULT_ORPHAN_AGE.total_seconds() * 1000)
    elif isinstance(older_than, dt.timedelta):
        if older_than < dt.timedelta(0):
            raise InvalidOptionError(f"older_than: a safety age must not be negative, got {older_than}")
        threshold = now_ms - int(older_than.total_seconds() * 1000)
    else:
        threshold = _millis(older_than, "older_than")
    _check_supported(table)
    result = OrphanResult(dry_run, threshold)
    # List first, then read the roots: a file written after the listing is not judged; one written before it
    # by a commit still in flight is younger than the safety age.
    root = table.path
    depth = len(table.partition_keys)
    listed = []
    for i, info in enumerate(table.io.walk(root)):
        listed.append(info)
        if progress and i % 500 == 0:
            progress("listing files", i + 1, 0)
    result.scanned = len(listed)
    referenced = referenced_names(table)
    orphans = []
    for info in listed:
        if not info.path.startswith(root + "/"):
            continue
        rel = info.path[len(root) + 1:]
        if not _orphan_candidate(rel, depth):
            continue
        name = rel.rsplit("/", 1)[-1]
        if name in referenced or info.mtime_ms >= threshold:
            continue
        orphans.append(OrphanFile(info.path, info.size, info.mtime_ms))
    orphans.sort(key=lambda f: f.path)
    result.files = orphans
    if dry_run or not orphans:
        return result
    # Re-read the roots just before deleting: anything referenced meanwhile stays.
    referenced = referenced_names(table)
    result.files = [f for f in orphans if f.path.rsplit("/", 1)[-1] not in referenced]
    executor = _Executor(table, CleanupResult("remove-orphan-files", False), progress)
    paths = [f.path for f in result.files]
    executor.delete_files(paths, "deleting orphan files")
    executor._remove_empty_dirs([p for p in paths if "/bucket-" in p])
    return result


def tty_progress(stream=None) -> Progress | None:
    """A progress callback writing one updating line to stderr, or None when stderr is not a terminal."""
    stream = stream or sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        return None
    state = {"stage": None, "last": 0.0}

    def report(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = total and done >= total
        if stage == state["stage"] and not finished and now - state["last"] < 0.1:
            return
        state["stage"], state["last"] = stage, now
        text = f"{stage}: {done}/{total}" if total else f"{stage}: {done}"
        stream.write("\r\x1b[2K" + text + ("\n" if finished else ""))
        stream.flush()

    return report
