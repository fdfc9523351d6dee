"""A lookup write's changelog made of its data file's encoded columns (changelog/lookup.py, parquet_splice.py)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.schema import VALUE_KIND

from .changelog_helpers import changelog_rows

SCHEMA = pa.schema([("k", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])
LONG = "a value longer than the sixteen characters statistics keep: "


def rows(items):
    return pa.table({"k": [i[0] for i in items], "name": [i[1] for i in items], "amount": [i[2] for i in items]},
                    schema=SCHEMA)


HISTORY = [(k, None if k % 7 == 0 else f"{LONG}{k:03d}", float("nan") if k % 11 == 0 else k / 3)
           for k in range(0, 200, 2)]
# updates of existing keys (to lower and higher values, to and from null and NaN) and new keys in between
UPSERT = [(k, f"{LONG}{900 - k:03d}" if k % 3 else None, float("nan") if k % 5 == 0 else -k)
          for k in range(0, 120, 3)] + [(k, "new " * (k % 6), k * 2.5) for k in range(201, 260, 2)]


def lookup_table(catalog, name, extra=None, history=HISTORY):
    t = catalog.create_table(f"db.{name}", SCHEMA, primary_keys=["k"],
                             options={"changelog-producer": "lookup", "bucket": "1", **(extra or {})})
    t.write(rows(history))
    return t


def changelog_entry(t):
    (entry,) = t.changelog_entries(t.latest_snapshot())
    return entry, t.data_file_path((), 0, entry.file)


def expected_changelog():
    history = {k: (n, a) for k, n, a in HISTORY}
    out = []
    for k, n, a in UPSERT:
        if k in history:
            out += [("-U", k, *history[k]), ("+U", k, n, a)]
        else:
            out.append(("+I", k, n, a))
    return out


def comparable(changes):
    return sorted((kind, k, n, "nan" if a != a else a) for kind, k, n, a in changes)


def test_an_upsert_changelog_copies_the_data_files_columns_and_puts_the_retractions_first(catalog):
    t = lookup_table(catalog, "spliced")
    snap = t.write(rows(UPSERT))
    entry, path = changelog_entry(t)
    got = changelog_rows(t, snap)
    assert comparable(got) == comparable(expected_changelog())
    updated = sum(1 for kind, *_ in got if kind == "-U")
    # the -U rows first, as a row group of their own; a key's -U before its +U
    assert [kind for kind, *_ in got] == ["-U"] * updated + [kind for kind, *_ in got[updated:]]
    assert all(kind in ("+I", "+U") for kind, *_ in got[updated:])
    meta = pq.read_metadata(path)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [updated, len(UPSERT)]

    # every column of the +I/+U row group but the kinds is the data file's column chunk, byte for byte
    (data_entry,) = [e for e in t.file_entries(t.snapshot(snap.id - 1)) if e.file.level == 0]
    data_path = t.data_file_path((), 0, data_entry.file)
    data_meta = pq.read_metadata(data_path)
    assert data_meta.num_row_groups == 1
    changelog_bytes, data_bytes = open(path, "rb").read(), open(data_path, "rb").read()

    def chunk(meta, source, i, group):
        column = meta.row_group(group).column(i)
        start = column.dictionary_page_offset or column.data_page_offset
        return source[start:start + column.total_compressed_size]

    for i in range(meta.num_columns):
        copied = chunk(meta, changelog_bytes, i, 1) == chunk(data_meta, data_bytes, i, 0)
        assert copied == (meta.schema.column(i).name != VALUE_KIND)
        # Parquet statistics: the copied chunks keep the data file's; the encoded ones (-U rows, kinds) keep none
        assert meta.row_group(1).column(i).is_stats_set == copied
        assert not meta.row_group(0).column(i).is_stats_set


# the former values of the updated keys: NaN or null amounts only (Arrow's bounds of such rows are NaN, or none)
NAN_HISTORY = [(k, f"{LONG}{k:03d}", float("nan") if k % 4 else None) for k in range(0, 120, 3)]


@pytest.mark.parametrize("history", [HISTORY, NAN_HISTORY], ids=["mixed", "nan-before"])
def test_a_spliced_changelog_is_described_as_one_written_row_by_row(catalog, history):
    # The same writes on a table whose changelog is written the usual way (row-deduplicate changes nothing here:
    # every update changes its row): the manifest entries of the two changelogs say the same, statistics merged
    # from the data file's (truncated strings, nulls, NaN) included.
    spliced = lookup_table(catalog, "spliced", history=history)
    usual = lookup_table(catalog, "usual", {"changelog-producer.row-deduplicate": "true"}, history=history)
    spliced.write(rows(UPSERT))
    usual.write(rows(UPSERT))
    (a, a_path), (b, b_path) = changelog_entry(spliced), changelog_entry(usual)
    assert pq.read_metadata(a_path).num_row_groups == 2 and pq.read_metadata(b_path).num_row_groups == 1
    assert comparable(changelog_rows(spliced, spliced.latest_snapshot())) == \
        comparable(changelog_rows(usual, usual.latest_snapshot()))
    fields = ["row_count", "min_key", "max_key", "key_stats", "value_stats", "value_stats_cols", "min_sequence_number",
              "max_sequence_number", "delete_row_count", "level", "file_source", "schema_id"]
    assert {f: getattr(a.file, f) for f in fields} == {f: getattr(b.file, f) for f in fields}


def test_writes_with_deletes_or_inserts_only_get_a_whole_changelog(catalog):
    t = lookup_table(catalog, "mixed")
    # a delete among the rows: the usual changelog, one row group in key order
    snap = t.write(rows([(2, "x", 1.0), (4, None, None), (301, "y", 2.0)]), kinds=pa.array([2, 3, 0], pa.int8()))
    entry, path = changelog_entry(t)
    assert pq.read_metadata(path).num_row_groups == 1
    assert [(kind, k) for kind, k, *_ in changelog_rows(t, snap)] == [("-U", 2), ("+U", 2), ("-D", 4), ("+I", 301)]
    # only new keys: no retraction, and the changelog is the data file's rows as +I
    snap = t.write(rows([(401, "a", 1.0), (403, "b", 2.0)]))
    entry, path = changelog_entry(t)
    assert [meta.num_rows for meta in [pq.read_metadata(path)]] == [2]
    assert changelog_rows(t, snap) == [("+I", 401, "a", 1.0), ("+I", 403, "b", 2.0)]
    assert entry.file.delete_row_count == 0 and entry.file.row_count == 2


def test_a_data_file_that_cannot_be_spliced_gets_a_whole_changelog(catalog, monkeypatch):
    from airflow_paimon.format.changelog import lookup
    from airflow_paimon.format.parquet_splice import SpliceError

    def refuse(first, later):
        raise SpliceError("a Parquet footer with field 8 (encryption), which is not spliced")

    monkeypatch.setattr(lookup, "splice", refuse)
    t = lookup_table(catalog, "refused")
    snap = t.write(rows(UPSERT))
    entry, path = changelog_entry(t)
    assert pq.read_metadata(path).num_row_groups == 1
    assert comparable(changelog_rows(t, snap)) == comparable(expected_changelog())
    listed = {e.file.file_name for s in t.snapshots() for e in t.changelog_entries(s)}
    assert {f for f in os.listdir(os.path.dirname(path)) if f.startswith("changelog-")} == listed   # no stray file
