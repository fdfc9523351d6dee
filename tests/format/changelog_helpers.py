"""Reading a table's changelog straight from its files, and replaying it, for the changelog-producer tests."""

from __future__ import annotations

import pyarrow.parquet as pq

from airflow_paimon.format.schema import SEQUENCE_NUMBER, VALUE_KIND

KINDS = ("+I", "-U", "+U", "-D")


def changelog_rows(table, snapshot, columns=None) -> list[tuple]:
    """(kind, *values) of each changelog row a snapshot produced, as stored (Parquet read directly)."""
    columns = columns or table.schema().field_names
    out = []
    codec = table.partition_codec
    for entry in table.changelog_entries(snapshot):
        assert entry.file.file_name.startswith("changelog-") and entry.file.file_name.endswith(".parquet")
        path = table.data_file_path(codec.from_bytes(entry.partition), entry.bucket, entry.file)
        data = pq.read_table(path)
        assert data.num_rows == entry.file.row_count
        for row in data.to_pylist():
            out.append((KINDS[row[VALUE_KIND]], *[row[c] for c in columns]))
    return out


def changelog_sequence_numbers(table, snapshot) -> list[int]:
    out = []
    codec = table.partition_codec
    for entry in table.changelog_entries(snapshot):
        path = table.data_file_path(codec.from_bytes(entry.partition), entry.bucket, entry.file)
        out += pq.read_table(path, columns=[SEQUENCE_NUMBER]).column(0).to_pylist()
    return out


def all_changelog(table, columns=None) -> list[list[tuple]]:
    """Per snapshot (oldest first), its changelog rows."""
    return [changelog_rows(table, s, columns) for s in table.snapshots()]


def replay(table, key_columns) -> dict:
    """The table state the changelog describes: +I/+U set a key, -U/-D remove the exact value they name."""
    names = table.schema().field_names
    state: dict = {}
    for snap in table.snapshots():
        for kind, *values in changelog_rows(table, snap):
            row = dict(zip(names, values))
            key = tuple(row[k] for k in key_columns)
            if kind in ("+I", "+U"):
                assert kind == "+U" or key not in state, f"+I of a key that exists: {row}"
                state[key] = row
            else:
                assert state.get(key) == row, f"{kind} of {row}, but the changelog holds {state.get(key)}"
                del state[key]
    return state
