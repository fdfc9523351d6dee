"""The data of a table's page, read from a real table: timeline pages, tags, change counts, options, expiry."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa

from airflow_paimon.format import Catalog
from airflow_paimon.ui import page_data

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids]}, schema=SCHEMA)


def _table(tmp_path, options=None):
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    table = catalog.create_table("db.t", SCHEMA, primary_keys=["id"],
                                 options={"bucket": "1", "changelog-producer": "input", **(options or {})})
    table.write(_rows(1, 2, 3))                    # snapshot 1
    table.write(_rows(4))                          # snapshot 2
    table.delete(pa.table({"id": [2]}, schema=pa.schema([("id", pa.int64())])))   # snapshot 3
    table.create_tag("first", snapshot_id=1)
    table.create_tag("second", snapshot_id=2)
    return table


def test_timeline_pages_newest_first_with_delta_counts_and_tags(tmp_path):
    table = _table(tmp_path)
    tags = table.tags.list()
    first = page_data.timeline(table, tags, page=1, page_size=2)
    assert (first.total, first.pages, first.earliest_id, first.latest_id) == (3, 2, 1, 3)
    assert [r.id for r in first.rows] == [3, 2]
    delete, write = first.rows
    assert (write.added_records, write.deleted_records, write.added_files, write.tags) == (1, 0, 1, ("second",))
    assert delete.added_records == 1 and delete.deleted_records == 0  # a delete writes a -D row into a new file
    assert write.added_bytes == sum(os.path.getsize(p) for p in _data_files(table, 2))
    last = page_data.timeline(table, tags, page=9, page_size=2)     # clamped to the last page
    assert (last.page, [r.id for r in last.rows], last.rows[0].tags) == (2, [1], ("first",))
    assert [t.name for t in page_data.tag_rows(tags)] == ["second", "first"]


def _data_files(table, snapshot_id):
    snap = table.snapshot(snapshot_id)
    entries = [e for m in table.manifest_io.read_list(snap.delta_manifest_list)
               for e in table.manifest_io.read_entries(m.file_name)]
    return [table.data_file_path(table.partition_codec.from_bytes(e.partition), e.bucket, e.file) for e in entries]


def test_changes_are_counted_per_day_and_change_type(tmp_path):
    table = _table(tmp_path)
    counts = page_data.changes_per_day(table, 1, 3)
    assert counts.error is None
    assert len(counts.days) == 1
    assert {k: sum(v) for k, v in counts.counts.items()} == {"insert": 1, "delete": 1}
    assert page_data.changes_per_day(table, 3, 3).days == []


def test_only_the_options_that_drive_tags_retention_and_changelog_are_listed(tmp_path):
    table = _table(tmp_path, {"tag.create-time": "01:00", "snapshot.num-retained.min": "1",
                              "write-buffer-size": "64 mb"})
    keys = [k for k, _ in page_data.driving_options(table.options())]
    assert keys == ["changelog-producer", "snapshot.num-retained.min", "tag.create-time"]


def test_expiry_preview_is_a_dry_run_with_the_bytes_it_would_free(tmp_path):
    table = _table(tmp_path, {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    before = sorted(p for p, _, _ in os.walk(tmp_path))
    files_before = {os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs}
    preview = page_data.expiry_preview(table, now=dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc))
    assert preview.snapshots.dry_run and preview.snapshots.snapshots == [1, 2]
    assert preview.keep_from == 3
    assert preview.snapshots.bytes_freed > 0
    assert {os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs} == files_before
    assert sorted(p for p, _, _ in os.walk(tmp_path)) == before


def test_schema_fields_mark_the_keys(tmp_path):
    fields = page_data.schema_fields(_table(tmp_path))
    assert [(f.name, f.type, f.primary_key) for f in fields] == [("id", "BIGINT NOT NULL", True),
                                                                ("value", "STRING", False)]


def test_a_partial_expiry_preview_says_how_many_of_how_many_it_shows(tmp_path):
    import jinja2

    table = _table(tmp_path, {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    table.write(_rows(5))                                                         # snapshot 4: 1..3 expire
    preview = page_data.expiry_preview(table, now=dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc), shown=2)
    assert (preview.expirable, preview.snapshots.snapshots, preview.keep_from) == (3, [1, 2], 4)
    templates = os.path.join(os.path.dirname(page_data.__file__), "templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    html = " ".join(env.get_template("expiry.html").render(
        prefix="/paimon", conn_id="c", conn_href="/c", database="db", table="t", table_href="/t", preview=preview,
        max_files=200).split())
    assert "the files of the oldest 2 of 3 are shown" in html
    assert "Snapshots: 1 to 2 (2)" in html
