"""Damaged or missing files and impossible names: one error that names the file or the argument, what is wrong
and what to do, and nothing on disk changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_paimon.format import PaimonError, TagNotFoundError
from airflow_paimon.format.errors import CorruptFileError

from .upkeep_helpers import FUTURE, make_table, tree_digest, upsert


@pytest.fixture
def table(tmp_path):
    t = make_table(tmp_path)
    upsert(t, range(4), 1)
    upsert(t, [9], 2)
    t.tags.create("one", snapshot_id=1)
    return t


def _fresh(t):
    """A new handle: nothing cached from before the damage."""
    from airflow_paimon.format import Catalog
    return Catalog(os.path.dirname(os.path.dirname(t.path))).get_table(t.identifier)


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"id": 2}'])
def test_a_damaged_snapshot_file_is_named(table, content):
    path = f"{table.path}/snapshot/snapshot-2"
    Path(path).write_bytes(content)
    before = tree_digest(table.path)
    t = _fresh(table)
    for action in (t.read, lambda: t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE),
                   lambda: t.maintenance.rollback(to_snapshot=1)):
        with pytest.raises(CorruptFileError) as e:
            action()
        message = str(e.value)
        assert message.startswith(f"snapshot file {path} is not valid Paimon JSON (") and "restore it" in message
        assert "\n" not in message
    assert tree_digest(table.path) == before


def test_a_damaged_tag_file_is_named(table):
    path = f"{table.path}/tag/tag-one"
    Path(path).write_text('{"id": 1, "tagCreateTime": "yesterday"')
    before = tree_digest(table.path)
    for action in (lambda: table.read(tag="one"), table.tags.list, lambda: table.maintenance.delete_tag("one")):
        with pytest.raises(CorruptFileError, match=f"tag file {path} is not valid Paimon JSON .*delete that file"):
            action()
    assert tree_digest(table.path) == before


def test_a_truncated_manifest_is_named(table):
    snap = table.latest_snapshot()
    name = table.manifest_io.read_list(snap.delta_manifest_list)[0].file_name
    path = f"{table.path}/manifest/{name}"
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 3])
    before = tree_digest(table.path)
    t = _fresh(table)
    for action in (t.read, lambda: t.maintenance.rollback(to_tag="one", dry_run=True)):
        with pytest.raises(CorruptFileError) as e:
            action()
        assert str(e.value).startswith(f"manifest file {path} is truncated or not a Paimon Avro file (")
        assert "avro file?" not in str(e.value).split("(", 1)[0]
    assert tree_digest(table.path) == before
    Path(path).write_bytes(b"")
    with pytest.raises(CorruptFileError, match=r"\(empty\)"):
        _fresh(table).read()


def test_a_missing_data_file_is_named_with_its_snapshot(table):
    entry = table.file_entries(table.latest_snapshot())[0]
    path = table.data_file_path(table.partition_codec.from_bytes(entry.partition), entry.bucket, entry.file)
    os.remove(path)
    with pytest.raises(PaimonError) as e:
        table.read()
    assert str(e.value).startswith(f"data file {path} of snapshot 2 of db.t is missing")
    assert "restore it" in str(e.value)


def test_an_overlong_tag_name_is_not_found_not_an_os_error(table):
    name = "x" * 300
    assert not table.tags.exists(name)
    for action in (lambda: table.tags.get(name), lambda: table.read(tag=name),
                   lambda: table.maintenance.delete_tag(name), lambda: table.maintenance.rollback(to_tag=name)):
        with pytest.raises(TagNotFoundError) as e:
            action()
        assert "does not exist on db.t; existing tags: 'one'" in str(e.value)
        assert "(300 characters)" in str(e.value) and "Errno" not in str(e.value)
    with pytest.raises(PaimonError, match="300 characters long; at most 255"):
        table.tags.create(name)
    with pytest.raises(PaimonError, match="on a local filesystem at most 213 fit"):
        table.tags.create("é" * 120)
