"""The files a commit leaves behind have Paimon's names, fields and layout."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_paimon.format.binary_row import deserialize_row

from .conftest import ORDERS, orders


def test_layout_schema_snapshot_manifests_and_data_files(catalog):
    t = catalog.create_table("db.orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                             options={"bucket": "2"})
    t.write(orders(range(10), "2026-11-20"))
    t.write(orders(range(5), "2026-11-21", version=1))
    root = Path(catalog.warehouse) / "db.db" / "orders"

    schema = json.loads((root / "schema" / "schema-0").read_text())
    assert schema["fields"][0] == {"id": 0, "name": "id", "type": "BIGINT NOT NULL"}
    assert schema["fields"][1]["type"] == "STRING NOT NULL" and schema["fields"][2]["type"] == "STRING"
    assert schema["partitionKeys"] == ["dt"] and schema["primaryKeys"] == ["id", "dt"]
    assert schema["highestFieldId"] == 3 and schema["options"] == {"bucket": "2"}

    assert (root / "snapshot" / "LATEST").read_text() == "2"
    assert (root / "snapshot" / "EARLIEST").read_text() == "1"
    snap = json.loads((root / "snapshot" / "snapshot-2").read_text())
    for key in ("version", "id", "schemaId", "baseManifestList", "deltaManifestList", "commitUser",
                "commitIdentifier", "commitKind", "timeMillis", "totalRecordCount", "deltaRecordCount"):
        assert key in snap, key
    assert snap["version"] == 3 and snap["commitKind"] == "APPEND" and snap["totalRecordCount"] == 15
    assert snap["deltaRecordCount"] == 5 and snap["commitIdentifier"] == 2**63 - 1

    lst = list(fastavro.reader(io.BytesIO((root / "manifest" / snap["deltaManifestList"]).read_bytes())))
    assert len(lst) == 1 and lst[0]["_NUM_ADDED_FILES"] >= 1 and lst[0]["_NUM_DELETED_FILES"] == 0
    entries = list(fastavro.reader(io.BytesIO((root / "manifest" / lst[0]["_FILE_NAME"]).read_bytes())))
    assert {e["_KIND"] for e in entries} == {0} and {e["_TOTAL_BUCKETS"] for e in entries} == {2}
    assert {tuple(deserialize_row(e["_PARTITION"], [pa.string()])) for e in entries} == {("2026-11-21",)}
    f = entries[0]["_FILE"]
    assert f["_FILE_NAME"].startswith("data-") and f["_FILE_NAME"].endswith(".parquet")
    assert f["_LEVEL"] == 0 and f["_SCHEMA_ID"] == 0

    data_file = root / "dt=2026-11-21" / f"bucket-{entries[0]['_BUCKET']}" / f["_FILE_NAME"]
    pf = pq.ParquetFile(data_file)
    assert pf.schema_arrow.names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "dt", "name", "amount"]
    field_ids = [pf.schema_arrow.field(i).metadata[b"PARQUET:field_id"] for i in range(4)]
    assert field_ids == [str(2**30 - 1).encode(), str(2**31 - 2).encode(), str(2**31 - 3).encode(), b"0"]
    rows = pf.read()
    assert rows.column("_KEY_id").to_pylist() == sorted(rows.column("_KEY_id").to_pylist())
    assert rows.num_rows == f["_ROW_COUNT"] and set(rows.column("_VALUE_KIND").to_pylist()) == {0}
    assert deserialize_row(f["_MIN_KEY"], [pa.int64()]) == [min(rows.column("id").to_pylist())]
    assert deserialize_row(f["_MAX_KEY"], [pa.int64()]) == [max(rows.column("id").to_pylist())]


def test_append_table_files_hold_columns_only(catalog):
    t = catalog.create_table("db.events", ORDERS, partition_keys=["dt"])
    t.write(orders(range(4), "x"))
    files = list((Path(catalog.warehouse) / "db.db" / "events" / "dt=x" / "bucket-0").iterdir())
    assert len(files) == 1
    assert pq.ParquetFile(files[0]).schema_arrow.names == ["id", "dt", "name", "amount"]


def test_partition_directories_escape_and_default_name(catalog):
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = catalog.create_table("db.esc", schema, partition_keys=["p"])
    t.write(pa.table({"id": [1, 2, 3], "p": ["a/b", None, "c=d"]}, schema=schema))
    dirs = sorted(p.name for p in (Path(catalog.warehouse) / "db.db" / "esc").iterdir() if p.name.startswith("p="))
    assert dirs == ["p=__DEFAULT_PARTITION__", "p=a%2Fb", "p=c%3Dd"]
    assert sorted(map(str, t.read().column("p").to_pylist())) == ["None", "a/b", "c=d"]


def test_dictionaries_only_where_values_repeat(catalog):
    """Nearly unique columns (a sample of them at least 90% distinct, too many to fit a dictionary page) are
    written plain; columns of repeated values keep their dictionary, also with a few thousand distinct values."""
    n = 300_000
    ids = np.arange(n, dtype=np.int64)
    data = pa.table({
        "id": ids,
        "label": pa.array([f"customer-{i}" for i in ids]),   # unique strings
        "score": ids * 0.5,                                     # unique doubles
        "city": pa.array(["Amsterdam", "Berlin", None][i % 3] for i in range(n)),
        "sku": pa.array([f"sku-{i % 3000}" for i in range(n)]),  # 3000 values, each repeated
    })
    t = catalog.create_table("db.dicts", data.schema, primary_keys=["id"], options={"bucket": "1"})
    t.write(data)
    files = list((Path(catalog.warehouse) / "db.db" / "dicts" / "bucket-0").glob("data-*.parquet"))
    meta = pq.ParquetFile(files[0]).metadata
    encodings = {meta.schema.column(i).name: set(meta.row_group(0).column(i).encodings)
                 for i in range(meta.num_columns)}
    dictionary = {name for name, used in encodings.items() if used & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}}
    assert dictionary == {"_VALUE_KIND", "city", "sku"}
    assert "DELTA_BINARY_PACKED" in encodings["_KEY_id"] and "DELTA_BINARY_PACKED" in encodings["id"]
    got = t.read().sort_by("id")
    assert all(got.column(name).to_pylist() == data.column(name).to_pylist() for name in ("label", "city", "sku"))
    # A small file is sampled whole: its unique strings are written plain, its repeated ones keep a dictionary.
    t.write(data.slice(0, 1000))
    small = [f for f in (Path(catalog.warehouse) / "db.db" / "dicts" / "bucket-0").glob("data-*.parquet")
             if f not in files]
    meta = pq.ParquetFile(small[0]).metadata
    assert {meta.schema.column(i).name for i in range(meta.num_columns)
            if set(meta.row_group(0).column(i).encodings) & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}} \
        == {"_VALUE_KIND", "city"}


def _dictionary_columns(path: Path) -> set[str]:
    meta = pq.ParquetFile(path).metadata
    return {meta.schema.column(i).name for i in range(meta.num_columns)
            if set(meta.row_group(0).column(i).encodings) & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}}


def test_a_changelog_file_takes_the_encodings_of_the_data_file_written_with_it(catalog, monkeypatch):
    """A write's changelog holds versions of the rows of the data file it writes: it is encoded as that data file
    is (dictionaries on the repeated columns only), decided on one sample, and reads back as written."""
    from airflow_paimon.format import data_file

    decisions = []
    decide = data_file.dictionary_columns
    monkeypatch.setattr(data_file, "dictionary_columns", lambda *a: decisions.append(1) or decide(*a))
    n = 20_000
    ids = np.arange(n, dtype=np.int64)

    def rows(version: int, keys: np.ndarray) -> pa.Table:
        return pa.table({"id": keys, "label": pa.array([f"customer-v{version}-{i}" for i in keys]),
                         "city": pa.array([["Amsterdam", "Berlin", "Cairo"][i % 3] for i in keys])})

    for producer in ("input", "lookup"):
        t = catalog.create_table(f"db.cl_{producer}", rows(0, ids[:1]).schema, primary_keys=["id"],
                                 options={"bucket": "1", "changelog-producer": producer})
        bucket = Path(catalog.warehouse) / "db.db" / f"cl_{producer}" / "bucket-0"
        t.write(rows(0, ids))
        first = t.latest_snapshot().id
        seen = set(bucket.glob("*.parquet"))
        decisions.clear()
        t.write(rows(1, ids[::2]))   # updates: the lookup changelog holds -U and +U of each key
        assert len(decisions) == 1, producer   # one bucket: one sample for its data file and its changelog
        data = [f for f in bucket.glob("data-*.parquet") if f not in seen]
        changelog = [f for f in bucket.glob("changelog-*.parquet") if f not in seen]
        assert len(data) == 1 and len(changelog) == 1, producer
        assert _dictionary_columns(data[0]) == _dictionary_columns(changelog[0]) == {"_VALUE_KIND", "city"}
        feed = t.changes(first, t.latest_snapshot().id).read_all()
        assert feed.num_rows == (n // 2 if producer == "input" else n), producer
        assert sorted(feed.column("label").to_pylist()) == sorted(
            ([f"customer-v0-{i}" for i in ids[::2]] if producer == "lookup" else []) +
            [f"customer-v1-{i}" for i in ids[::2]])
