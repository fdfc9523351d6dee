"""Shared helpers of the upkeep tests (tags, expiry, rollback, orphans, system tables, model test)."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

from airflow_paimon.format import Catalog, Table
from airflow_paimon.format.fileio import FileIO
from airflow_paimon.format.manifest import ADD

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)

PK_SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
APPEND_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def make_table(root: Path | str, name: str = "db.t", pk: bool = True, partitioned: bool = False,
               buckets: int = 2, options: dict[str, str] | None = None) -> Table:
    catalog = Catalog(str(root))
    catalog.create_database(name.split(".")[0], ignore_if_exists=True)
    opts = dict(options or {})
    if pk:
        opts.setdefault("bucket", str(buckets))
        return catalog.create_table(name, PK_SCHEMA, primary_keys=["p", "id"] if partitioned else ["id"],
                                    partition_keys=["p"] if partitioned else [], options=opts)
    return catalog.create_table(name, APPEND_SCHEMA, options=opts)


def upsert(table: Table, ids, v: int, p: str = "a"):
    ids = list(ids)
    return table.write(pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids),
                                 "v": pa.array([v] * len(ids), pa.int64())}))


def delete(table: Table, ids, p: str = "a"):
    ids = list(ids)
    return table.delete(pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids)}))


def rows(data: pa.Table) -> list[tuple]:
    cols = data.column_names
    return sorted(tuple(r[c] for c in cols) for r in data.to_pylist())


def store_file(path: str) -> bytes:
    """A file's bytes, on a local disk or the object store its URI names (settings from the environment)."""
    return FileIO(path).read_bytes(path) if "://" in path else Path(path).read_bytes()


def put_file(path: str, data: bytes) -> None:
    """Write a file as another writer would, on a local disk or the object store its URI names."""
    if "://" in path:
        FileIO(path).write_bytes(path, data)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_bytes(data)


def store_exists(path: str) -> bool:
    """A file or a directory (on an object store: a non-empty prefix) at `path`."""
    return FileIO(path).exists(path)


def tree_digest(root: Path | str) -> dict[str, str]:
    """Every file under `root` with the hash of its bytes: proof that an operation changed nothing."""
    if "://" in str(root):
        io = FileIO(str(root))
        return {f.path[len(str(root)):]: hashlib.sha256(io.read_bytes(f.path)).hexdigest()
                for f in io.walk(str(root))}
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def all_files(root: Path | str) -> set[str]:
    if "://" in str(root):
        return {f.path for f in FileIO(str(root)).walk(str(root))}
    out = set()
    for d, _, files in os.walk(str(root)):
        for f in files:
            out.add(os.path.join(d, f))
    return out


def live_data_paths(table: Table, snapshot) -> set[str]:
    """Paths of the data files a read of `snapshot` uses (independent of the code under test)."""
    codec = table.partition_codec
    out = set()
    for e in table.file_entries(snapshot):
        out.add(table.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file))
    return out


def index_paths(table: Table, snapshot) -> set[str]:
    """The index manifest of `snapshot` and the index files it lists (read with fastavro, not the library)."""
    if not snapshot.index_manifest:
        return set()
    path = f"{table.path}/manifest/{snapshot.index_manifest}"
    records = list(fastavro.reader(io.BytesIO(store_file(path))))
    return {path} | {r["_EXTERNAL_PATH"] or f"{table.path}/index/{r['_FILE_NAME']}" for r in records}


def metadata_paths(table: Table, snapshot) -> set[str]:
    mdir = f"{table.path}/manifest"
    out = set()
    for lst in (snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.changelog_manifest_list):
        if lst:
            out.add(f"{mdir}/{lst}")
            for m in table.manifest_io.read_list(lst):
                out.add(f"{mdir}/{m.file_name}")
    return out | index_paths(table, snapshot)


def referenced_names(table: Table) -> set[str]:
    """Every file name any snapshot or tag mentions (metadata, and data files of any manifest entry)."""
    names = set()
    snaps = [table.snapshot(i) for i in table.snapshot_manager.ids()] + [t.snapshot for t in table.tags.list()]
    for s in snaps:
        names.update(p.rsplit("/", 1)[-1] for p in index_paths(table, s))
        for lst in (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list):
            if not lst:
                continue
            names.add(lst)
            for m in table.manifest_io.read_list(lst):
                names.add(m.file_name)
                for e in table.manifest_io.read_entries(m.file_name):
                    names.add(e.file.file_name)
                    names.update(e.file.extra_files)
    return names


def judged_files(table: Table) -> set[str]:
    """Files orphan cleanup judges: data files in bucket directories and files in manifest/ and index/."""
    out = set()
    root = table.path
    for p in all_files(root):
        rel = os.path.relpath(p, root).split(os.sep)
        if rel[0] in ("manifest", "index") or (len(rel) >= 2 and rel[-2].startswith("bucket-")):
            out.add(p)
    return out


def check_all_readable(table: Table, expected: dict[Any, list] | None = None) -> None:
    """Every retained snapshot and tag: its files exist and it reads (optionally: the expected rows)."""
    existing = all_files(table.path)
    for sid in table.snapshot_manager.ids():
        s = table.snapshot(sid)
        missing = (live_data_paths(table, s) | metadata_paths(table, s)) - existing
        assert not missing, f"snapshot {sid} lost {sorted(missing)}"
        got = rows(table.read(snapshot_id=sid))
        if expected is not None and ("snapshot", sid) in expected:
            assert got == expected[("snapshot", sid)], f"snapshot {sid} reads differently"
    for t in table.tags.list():
        missing = (live_data_paths(table, t.snapshot) | metadata_paths(table, t.snapshot)) - existing
        assert not missing, f"tag {t.name} lost {sorted(missing)}"
        got = rows(table.read(tag=t.name))
        if expected is not None and ("tag", t.name) in expected:
            assert got == expected[("tag", t.name)], f"tag {t.name} reads differently"


def snapshot_reads(table: Table) -> dict[Any, list]:
    out = {}
    for sid in table.snapshot_manager.ids():
        out[("snapshot", sid)] = rows(table.read(snapshot_id=sid))
    for t in table.tags.list():
        out[("tag", t.name)] = rows(table.read(tag=t.name))
    return out


def set_mtime(path: str, when: dt.datetime) -> None:
    ts = when.timestamp()
    os.utime(path, (ts, ts))


class FailAfter:
    """Patch FileIO.delete so that the (n+1)-th deletion raises: a crash in the middle of an operation."""

    class Crash(RuntimeError):
        pass

    def __init__(self, monkeypatch, io, n: int):
        self.n = n
        self.calls = 0
        real = io.delete

        def delete(path: str) -> None:
            if self.calls >= self.n:
                raise FailAfter.Crash(f"simulated crash before deleting {path}")
            self.calls += 1
            real(path)

        monkeypatch.setattr(io, "delete", delete)
        self.undo = lambda: monkeypatch.setattr(io, "delete", real)


def entries_added(table: Table, snapshot) -> list:
    out = []
    for m in table.manifest_io.read_list(snapshot.delta_manifest_list):
        out += [e for e in table.manifest_io.read_entries(m.file_name) if e.kind == ADD]
    return out
