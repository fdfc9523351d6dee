"""Orphan-file cleanup: files under the table that nothing references and that are older than a safety age."""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, AbstractSet, Any, Sequence

from ..errors import PaimonError
from ..values import millis_before, now_millis
from .file_index import FileIndex
from .plan import Executor, remove_empty_dirs
from .progress import Progress
from .results import CleanupResult, OrphanFile, OrphanResult
from .roots import Root, all_roots, check_supported, long_lived_changelogs, root_still_exists

if TYPE_CHECKING:
    from ..table import Table

DEFAULT_ORPHAN_AGE = dt.timedelta(days=1)
MAX_LISTED_FILES = 1000
"""Results handed to Airflow (XCom) list the paths of at most this many orphans; counts and bytes cover all."""


def orphan_threshold(older_than: Any, now_ms: int) -> int:
    """Epoch millis before which an unreferenced file may go: `older_than` is a point in time or a safety age
    (a duration before `now_ms`, ``timedelta`` or ``'3 d'``; default one day), never negative."""
    return millis_before(DEFAULT_ORPHAN_AGE if older_than is None else older_than, "older_than", now_ms)


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
            if root_still_exists(table, r):
                raise
            continue  # removed concurrently (expiry, tag deletion): whatever it referenced may go
        names.update(p.rsplit("/", 1)[-1] for p in meta)
    for m in manifests:
        names |= index.read_manifest(m, True).names
    # A long-lived changelog names more than it keeps alive (its base list, index and statistics, which expiry
    # may have deleted): whatever of that still exists is referenced too, as Paimon's orphan cleanup counts it.
    for changelog in long_lived_changelogs(table).values():
        names.update(p.rsplit("/", 1)[-1] for p in index.metadata(changelog, strict=False))
        for m in index.data_manifests(changelog, strict=False) + index.changelog_manifests(changelog, strict=False):
            refs = index.read_manifest(m, False)
            if refs is not None:
                names |= refs.names
    return names


def is_orphan_candidate(rel: str, partition_depth: int, data_directory: str | None) -> bool:
    """Whether a file at this table-relative path is one orphan cleanup may judge (never schema/, hints,
    snapshot/tag/changelog files themselves, consumers or branches); data files only inside the table's
    data-file.path-directory when it has one."""
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
    # data: [data-file.path-directory/][k=v/...]bucket-N/<file>
    if data_directory:
        if not rel.startswith(data_directory + "/"):
            return False
        parts = rel[len(data_directory) + 1:].split("/")
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
    threshold = orphan_threshold(older_than, now_millis(now))
    check_supported(table)
    started = time.monotonic()
    result = OrphanResult(dry_run, threshold, target=table.identifier)
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
    directory = table.core_options.data_file_directory
    orphans = sorted((f for f in (orphan_file(info, root, depth, referenced, threshold, directory)
                                  for info in listed) if f), key=lambda f: f.path)
    result.files = orphans
    if dry_run or not orphans:
        result.seconds = time.monotonic() - started
        return result
    # Re-read the roots just before deleting: anything referenced meanwhile stays.
    result.files = still_unreferenced(table, orphans)
    executor = Executor(table, CleanupResult("remove-orphan-files", False), progress)
    paths = result.paths
    executor.delete_files(paths, "deleting orphan files")
    remove_empty_data_dirs(table, paths)
    result.files_deleted = len(paths)
    result.seconds = time.monotonic() - started
    return result


def orphan_file(info: Any, root: str, partition_depth: int, referenced: AbstractSet[str],
                threshold_ms: int, data_directory: str | None) -> OrphanFile | None:
    """The listed file `info` as an orphan, or None: it must be a candidate under `root` (data files inside
    `data_directory`, the table's data-file.path-directory, when it has one), referenced by no root and older
    than the safety threshold."""
    if not info.path.startswith(root + "/"):
        return None
    rel = info.path[len(root) + 1:]
    if not is_orphan_candidate(rel, partition_depth, data_directory):
        return None
    if rel.rsplit("/", 1)[-1] in referenced or info.mtime_ms >= threshold_ms:
        return None
    return OrphanFile(info.path, info.size, info.mtime_ms)


def still_unreferenced(table: "Table", orphans: list[OrphanFile]) -> list[OrphanFile]:
    """The orphans that no root references now (read again just before deleting: a file a concurrent commit or
    tag took up meanwhile stays)."""
    referenced = referenced_names(table)
    return [f for f in orphans if f.path.rsplit("/", 1)[-1] not in referenced]


def remove_empty_data_dirs(table: "Table", deleted: list[str]) -> None:
    """Bucket directories (and partition directories above them) that deleting orphans left empty."""
    remove_empty_dirs(table.io, table.path, [p for p in deleted if "/bucket-" in p])
