"""The export folder both engines of ExportChangesOperator write (format/changes/export.py), and the size estimate
the operator's ``engine="auto"`` compares with its budget (``ChangePlan.read_bytes``)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.changes.export import (
    MARKER,
    PartWriter,
    clear_folder,
    finish_folder,
    manifest,
    part_name,
)
from airflow_paimon.format.changes.feed import plan_changes
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.fileio import FileIO
from airflow_paimon.format.scan import DECODED_PER_FILE_BYTE

SCHEMA = pa.schema([("id", pa.int64()), ("_change_type", pa.string())])


def batch(ids, kind="insert") -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array(ids, pa.int64()), "_change_type": [kind] * len(ids)}, schema=SCHEMA)


def write_folder(io: FileIO, folder: str, group: int | None = None, max_rows: int = 3) -> dict:
    clear_folder(io, folder)
    writer = PartWriter(io, folder, SCHEMA, max_rows, group)
    writer.write([batch(range(5)), batch([7, 8], "delete")])
    writer.close()
    done = manifest(table="db.t", folder=folder, start=1, end=2, mode="delta", files=writer.files,
                    counts=writer.counts, consumer=None, engine="local")
    finish_folder(io, folder, done)
    return done


def test_files_roll_at_max_rows_and_the_manifest_counts_them(tmp_path):
    folder = str(tmp_path / "out")
    done = write_folder(FileIO(folder), folder, group=2)
    assert [f["path"] for f in done["files"]] == [part_name(i, 2) for i in range(3)] == \
        ["part-00002-00000.parquet", "part-00002-00001.parquet", "part-00002-00002.parquet"]
    assert [f["rows"] for f in done["files"]] == [3, 2, 2]  # a batch starts a new file rather than split
    assert done["counts"] == {"delete": 2, "insert": 5} and done["rows"] == 7
    assert json.loads((tmp_path / "out" / MARKER).read_text()) == done
    assert pq.read_table(tmp_path / "out").column("id").to_pylist() == [0, 1, 2, 3, 4, 7, 8]


def test_finishing_deletes_what_the_manifest_does_not_list(tmp_path):
    """A failed task attempt's file (not in the manifest) is gone once the marker is there."""
    folder = str(tmp_path / "out")
    io = FileIO(folder)
    clear_folder(io, folder)
    pq.write_table(SCHEMA.empty_table(), tmp_path / "out" / "part-00009-00000.parquet")
    writer = PartWriter(io, folder, SCHEMA, 10)
    writer.write([batch([1])])
    writer.close()
    finish_folder(io, folder, manifest(table="db.t", folder=folder, start=0, end=1, mode="delta",
                                       files=writer.files, counts=writer.counts, consumer=None, engine="spark"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [MARKER, "part-00000.parquet"]


def test_an_empty_range_writes_one_empty_file_for_the_schema(tmp_path):
    folder = str(tmp_path / "out")
    writer = PartWriter(FileIO(folder), folder, SCHEMA, 10)
    writer.close()
    assert writer.files == [("part-00000.parquet", 0)]
    assert pq.read_schema(tmp_path / "out" / "part-00000.parquet") == SCHEMA


def test_a_folder_with_foreign_files_is_refused_untouched(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / MARKER).write_text("{}")
    with pytest.raises(InvalidOptionError, match="notes.txt"):
        clear_folder(FileIO(str(folder)), str(folder))
    assert sorted(p.name for p in folder.iterdir()) == [MARKER, "notes.txt"]


@pytest.mark.objectstore
def test_the_folder_on_an_object_store(s3_server):
    from tests.s3_server import S3Server

    assert isinstance(s3_server, S3Server)
    folder = f"s3://{s3_server.new_bucket()}/exports/2026-11-20"
    io = FileIO(folder, s3_server.options())
    first = write_folder(io, folder, max_rows=2)
    assert len(first["files"]) == 4
    again = write_folder(io, folder, max_rows=10)  # a re-run replaces the folder
    names = sorted(info.path.rsplit("/", 1)[-1] for info in io.list_dir(folder))
    assert names == [MARKER, "part-00000.parquet"] and again["rows"] == 7
    assert json.loads(io.read_text(f"{folder}/{MARKER}"))["files"] == again["files"]


def test_read_bytes_follows_the_files_the_range_reads(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = cat.create_table("db.t", schema, primary_keys=["id"], options={"bucket": "4"})
    t.write(pa.table({"id": list(range(100)), "v": ["a"] * 100}, schema=schema))
    t.tags.create("one")
    t.write(pa.table({"id": [5], "v": ["b"]}, schema=schema))   # one bucket changes
    t.tags.create("two")
    delta = plan_changes(t, 1, 2, mode="delta")
    assert delta.read_bytes == sum(u.entry.file.file_size for u in delta.planned) * DECODED_PER_FILE_BYTE
    diff = plan_changes(t, "one", "two")
    assert diff.mode == "diff"
    every_file = sum(e.file.file_size for side in diff.ends for e in side) * DECODED_PER_FILE_BYTE
    assert 0 < diff.read_bytes < every_file   # only the changed bucket's files
    assert plan_changes(t, 2, 2).read_bytes == 0
