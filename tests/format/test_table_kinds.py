"""Tables of kinds this library cannot read or write exactly open all the same: their snapshots, tags, expiry,
orphan cleanup and rollback work; their reads and writes are refused at the read or write, naming the table kind
and the option, with nothing changed.

The tables are written here as fixed-bucket primary-key (or append) tables, then their schema file is given the
options (and, for MULTISET columns, also inside a MAP, the JSON type objects) Paimon writes for the other kinds.
"""

from __future__ import annotations

import json

import pytest

from airflow_paimon.format import Catalog, UnsupportedTableError

from .upkeep_helpers import FUTURE, make_table, tree_digest, upsert


def _reshape(table, options: dict[str, str], column_type: object = None):
    path = f"{table.path}/schema/schema-0"
    doc = json.load(open(path))
    doc["options"].update(options)
    if options.get("bucket") == "-1" and doc["primaryKeys"] == ["p", "id"]:
        doc["primaryKeys"] = ["id"]  # a cross-partition upsert table
    if column_type is not None:
        doc["fields"][2]["type"] = column_type
    json.dump(doc, open(path, "w"), indent=2)
    return Catalog(table.path.rsplit("/", 2)[0]).get_table(table.identifier)


KINDS = [
    # (primary key?, options, column type of `v`, read refused with, write refused with)
    (True, {"bucket": "-2"}, None, "postpone-bucket table \\(bucket = -2\\)", "bucket = -2"),
    (True, {"merge-engine": "partial-update"}, None, "merge-engine is 'partial-update'", "partial-update"),
    (True, {"merge-engine": "aggregation"}, None, "merge-engine is 'aggregation'", "aggregation"),
    (True, {"file.format": "orc"}, None, "file.format is 'orc'", "orc"),
    (True, {"bucket": "-1", "bucket-key": "id"}, None, None,
     "dynamic-bucket primary-key table \\(bucket = -1\\) with a bucket-key"),
    ("partitioned", {"bucket": "-1"}, None, "cross-partition upsert table \\(its primary key \\['id'\\]",
     "cross-partition upsert table \\(its primary key \\['id'\\]"),
    (True, {"file.compression": "lzo"}, None, None, "file.compression 'lzo'"),
    (True, {"file.compression.per.level": "0:lz4,3:lzo"}, None, None,
     "file.compression.per.level gives level 3 the codec 'lzo'"),
    (True, {"file.format.per.level": "0:avro"}, None, None, "file.format.per.level gives level 0 the format 'avro'"),
    (False, {"data-evolution.enabled": "true", "row-tracking.enabled": "true"}, None,
     "data-evolution.enabled = true", "data-evolution"),
    (False, {"bucket": "3"}, None, None, "bucketed append table \\(bucket = 3\\) without a bucket-key"),
    (False, {"row-tracking.enabled": "true"}, None, None, "row-tracking table \\(row-tracking.enabled = true\\)"),
    (False, {"bucket": "2", "bucket-key": "id", "bucket-function.type": "MURMUR"}, None, None,
     "bucket-function.type is 'murmur' \\(Paimon's are default, mod, hive\\)"),
    (True, {"changelog-producer": "input", "changelog-file.format": "avro"}, None, None,
     "changelog-file.format is 'avro'"),
    (True, {}, {"type": "MULTISET", "element": "STRING"}, "column 'v': nested type MULTISET<STRING>",
     "MULTISET<STRING>"),
    (True, {}, {"type": "MAP", "key": "STRING NOT NULL", "value": {"type": "MULTISET", "element": "INT"}},
     "column 'v': nested type MULTISET<INT> is not supported", "column 'v': nested type MULTISET<INT>"),
    (True, {}, "TIME(0)", "TIME\\(0\\)", "TIME\\(0\\)"),
]


@pytest.mark.parametrize("pk, options, column_type, read_refusal, write_refusal", KINDS)
def test_metadata_works_and_data_access_is_refused_clearly(tmp_path, pk, options, column_type, read_refusal,
                                                            write_refusal):
    t = make_table(tmp_path, pk=bool(pk), partitioned=pk == "partitioned")
    for v in range(1, 5):
        if pk:
            upsert(t, range(v * 3), v)
        else:
            t.write(make_append(v))
    t.tags.create("first", snapshot_id=1)
    t.tags.create("second", snapshot_id=2)
    t = _reshape(t, options, column_type)

    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4]
    assert t.tags.names() == ["first", "second"]
    for name in ("snapshots", "tags", "files", "manifests", "schemas", "options"):
        getattr(t.inspect, name)()
    before = tree_digest(t.path)
    if read_refusal:
        with pytest.raises(UnsupportedTableError, match=f"cannot read db.t: .*{read_refusal}"):
            t.read()
    else:
        assert t.read().num_rows > 0
    with pytest.raises(UnsupportedTableError, match=f"cannot write to db.t: .*{write_refusal}"):
        upsert(t, [1], 9) if pk else t.write(make_append(9))
    assert tree_digest(t.path) == before

    t.tags.create("mine")
    assert t.maintenance.delete_tag("mine").tags == ["mine"]
    assert t.maintenance.expire_snapshots(retain_min=2, older_than=FUTURE).snapshots == [1, 2]
    assert t.maintenance.remove_orphan_files(older_than=FUTURE).files == []
    assert t.maintenance.rollback(to_tag="second").rolled_back_to == 2
    assert [s.id for s in t.snapshots()] == [2]


def make_append(v: int):
    import pyarrow as pa
    return pa.table({"id": pa.array(range(v * 3), pa.int64()), "v": [f"v{v}"] * (v * 3)})
