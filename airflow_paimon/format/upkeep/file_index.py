"""What a snapshot or tag references, read once per operation (manifests are immutable: cached by name)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple, Sequence, overload

from ..errors import PaimonError
from ..manifest import ADD, ManifestFileMeta
from ..partition import bucket_folder
from ..snapshot import Snapshot
from .progress import Progress

if TYPE_CHECKING:
    from ..table import Table


class FileRef(NamedTuple):
    partition: bytes
    bucket: int
    name: str
    size: int
    extras: tuple[str, ...]
    external: str | None


FileIdentifier = tuple[bytes, int, int, str]   # (partition, bucket, level, name) of a manifest entry


class ManifestRefs(NamedTuple):
    refs: dict[FileIdentifier, FileRef]   # ADD and DELETE entries
    adds: dict[FileIdentifier, FileRef]   # ADD entries
    deletes: frozenset[FileIdentifier]    # DELETE entries
    names: frozenset[str]                 # every data / extra file name mentioned


class FileIndex:
    """Reads manifests once and answers: what does a snapshot (or tag) read, mention and keep alive."""

    def __init__(self, table: "Table"):
        self.table = table
        self.io = table.io
        self.manifest_dir = f"{table.path}/manifest"
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._manifests: dict[str, ManifestRefs] = {}
        self._index: dict[str, list[tuple[str, int | None, str | None]]] = {}
        self._live: dict[tuple[str, str], dict[FileIdentifier, FileRef]] = {}
        self._pdirs: dict[bytes, str] = {}

    # ---- raw reads -------------------------------------------------------------------------------------
    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        got = self._lists.get(name)
        if got is None:
            got = self._lists[name] = self.table.manifest_io.read_list(name)
        return got

    def manifest(self, name: str) -> ManifestRefs:
        got = self._manifests.get(name)
        if got is not None:
            return got
        refs: dict[FileIdentifier, FileRef] = {}
        adds: dict[FileIdentifier, FileRef] = {}
        deletes: set[FileIdentifier] = set()
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
        got = self._manifests[name] = ManifestRefs(refs, adds, frozenset(deletes), frozenset(names))
        return got

    def index_files(self, index_manifest: str) -> list[tuple[str, int | None, str | None]]:
        got = self._index.get(index_manifest)
        if got is None:
            got = [(r["_FILE_NAME"], r.get("_FILE_SIZE"), r.get("_EXTERNAL_PATH"))
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

    @overload
    def read_manifest(self, name: str, strict: Literal[True]) -> ManifestRefs: ...

    @overload
    def read_manifest(self, name: str, strict: bool) -> ManifestRefs | None: ...

    def read_manifest(self, name: str, strict: bool) -> ManifestRefs | None:
        """The manifest's references; a missing one is an error when `strict`, else None."""
        try:
            return self.manifest(name)
        except FileNotFoundError:
            if strict:
                raise PaimonError(
                    f"manifest {name} of a retained snapshot or tag is missing; refusing to delete anything "
                    "(the live set cannot be computed)") from None
            return None

    def live(self, snap: Snapshot) -> dict[FileIdentifier, FileRef]:
        """identifier -> FileRef of the data files a read of `snap` uses (ADD minus DELETE)."""
        key = (snap.base_manifest_list, snap.delta_manifest_list)
        got = self._live.get(key)
        if got is not None:
            return got
        adds: dict[FileIdentifier, FileRef] = {}
        deletes: set[FileIdentifier] = set()
        for name in self.data_manifests(snap):
            m = self.read_manifest(name, True)
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
        added: dict[FileIdentifier, int] = {}
        deleted: dict[FileIdentifier, int] = {}
        refs: dict[FileIdentifier, FileRef] = {}
        total = len(roots_of)
        for n, (name, bits) in enumerate(roots_of.items()):
            m = self.read_manifest(name, True)
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
            out |= self.read_manifest(name, True).names
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
        return f"{self.table.data_root}/{pdir}{bucket_folder(ref.bucket)}/{ref.name}"

    def extra_paths(self, ref: FileRef) -> list[str]:
        base = self.data_path(ref).rsplit("/", 1)[0]
        return [f"{base}/{x}" for x in ref.extras]
