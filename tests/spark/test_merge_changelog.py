"""The merge application writes the changelog its target's `changelog-producer` asks for, on the Spark path (the
general MERGE, which hands its matched target rows to the `lookup` changelog, and the plain upsert, which looks
up its keys) and on the driver path: row for row, sequence number for sequence number and snapshot for snapshot
what the library's own producer writes for the same change applied with `Table.write` to a copy of the table,
and `$audit_log` reads the same."""

from __future__ import annotations

import dataclasses
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import Catalog
from airflow_paimon.format.schema import SEQUENCE_NUMBER, VALUE_KIND
from airflow_paimon.merge import matched_delete, matched_update, not_matched_by_source_delete, not_matched_insert
from airflow_paimon.spark.merge import run_merge

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("w", pa.string())])
SOURCE = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("w", pa.string()),
                    ("op", pa.string())])
KINDS = ("+I", "-U", "+U", "-D")
# Deletes where the source says so, updates every other matched key (also to equal values), inserts new keys
# unless they are deletes, and deletes target rows the source does not name whose v is a multiple of 7.
CLAUSES = [matched_delete(condition="s.op = 'D'"), matched_update(set={"v": "s.v", "w": "s.w"}),
           not_matched_insert(values="*", condition="s.op <> 'D'"),
           not_matched_by_source_delete(condition="t.v % 7 = 0")]


def rows(schema, data) -> pa.Table:
    cols = list(zip(*data)) if data else [[] for _ in schema]
    return pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, cols)}, schema=schema)


def make_target(wh: str, producer: str, partitioned: bool, options: dict[str, str], late: bool = False):
    """A table with history; `late`: the producer is set only after it, so its files are still at level 0."""
    catalog = Catalog(wh)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k", "p"], partition_keys=["p"] if partitioned else [],
                             options={"bucket": "3", "changelog-producer": "none" if late else producer, **options})
    t.write(rows(SCHEMA, [(k, "xy"[k % 2], k, f"w{k}") for k in range(30)]))
    t.write(rows(SCHEMA, [(k, "xy"[k % 2], 100 + k, f"w{k}") for k in range(0, 30, 4)]))
    if late:
        schema = t.schema()
        assert t.schema_manager.create(dataclasses.replace(schema, id=schema.id + 1,
                                                           options={**schema.options, "changelog-producer": producer}))
        t = catalog.get_table("db.t")
    return t


def source_rows() -> list[tuple]:
    """Equal values (k 1, 3), new values (k 2, 5, 6), new w only (k 9), deletes (k 10, 11, absent 40), inserts."""
    return [(1, "y", 1, "w1", "U"), (3, "y", 3, "w3", "U"), (2, "x", 20, "w2", "U"), (5, "y", 50, "w5", "U"),
            (6, "x", 60, "z", "U"), (9, "y", 9, "changed", "U"), (10, "x", 10, "w10", "D"),
            (11, "y", 11, "w11", "D"), (40, "x", 40, "-", "D"), (31, "y", 31, "new", "I"), (32, "x", 32, "n", "I")]


def model(target: pa.Table, source: list[tuple], plain: bool, by_source: bool = True) -> tuple[pa.Table, pa.Array]:
    """What the MERGE changes, as rows and kinds for `Table.write` (the rows of deleted keys as the target
    holds them)."""
    held = {(r["k"], r["p"]): r for r in target.to_pylist()}
    out, kinds, named = [], [], set()
    for k, p, v, w, op in source:
        named.add((k, p))
        if plain:
            out.append((k, p, v, w))
            kinds.append(0)
        elif (k, p) in held and op == "D":
            t = held[(k, p)]
            out.append((k, p, t["v"], t["w"]))
            kinds.append(3)
        elif (k, p) in held:
            out.append((k, p, v, w))
            kinds.append(2)
        elif op != "D":
            out.append((k, p, v, w))
            kinds.append(0)
    if not plain and by_source:
        for key, t in held.items():
            if key not in named and t["v"] % 7 == 0:
                out.append((t["k"], t["p"], t["v"], t["w"]))
                kinds.append(3)
    return rows(SCHEMA, out), pa.array(kinds, pa.int8())


def stored_changelog(t, first: int) -> dict[int, list[tuple]]:
    """Per snapshot after `first`: the changelog rows as stored (kind, values, sequence number), and the data
    files' levels stay out of level 0 where the producer moves them."""
    out = {}
    codec = t.partition_codec
    for s in t.snapshots():
        if s.id <= first or not s.changelog_manifest_list:
            continue
        found = []
        for e in t.changelog_entries(s):
            assert e.file.file_name.startswith("changelog-") and e.file.file_name.endswith(".parquet")
            data = pq.read_table(t.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file))
            found += [(KINDS[r[VALUE_KIND]], r["k"], r["p"], r["v"], r["w"], r[SEQUENCE_NUMBER])
                      for r in data.to_pylist()]
        out[s.id] = sorted(found, key=repr)
    return out


def feed(t, first: int) -> list[tuple]:
    got = t.changes(first, None, mode="changelog").read_all().drop_columns(["_commit_timestamp"]).to_pylist()
    return sorted((tuple(r.values()) for r in got), key=repr)


def merge_and_compare(spark, tmp_path, producer: str, partitioned: bool, options: dict[str, str], plain: bool,
                      driver: bool = False, late: bool = False, shuffle: bool = False, by_source: bool = True) -> None:
    spark_wh, library_wh = str(tmp_path / "spark"), str(tmp_path / "library")
    target = make_target(spark_wh, producer, partitioned, options, late)
    shutil.copytree(spark_wh, library_wh)
    base = target.latest_snapshot().id
    src = source_rows()
    source_file = str(tmp_path / "source.parquet")
    pq.write_table(rows(SCHEMA, [r[:4] for r in src]) if plain else rows(SOURCE, src), source_file)
    spec = {"target": "db.t", "warehouse": spark_wh, "source": source_file, "commit_user": "m",
            "commit_identifier": 1, "driver_bytes": (64 << 20) if driver else 0}
    if shuffle:
        spec["single_task_bytes"] = 0     # the source is shuffled by bucket instead of broadcast
    if not plain:
        spec["clauses"] = [c.to_dict() for c in (CLAUSES if by_source else CLAUSES[:-1])]
    result = run_merge(spark, spec)
    assert result["status"] == "committed" and result["engine"] == ("driver" if driver else "spark")
    assert result["mode"] == ("upsert" if plain else "merge")
    assert result.get("small_source") in (None, not shuffle)

    library = Catalog(library_wh).get_table("db.t")
    held = library.read()
    data, kinds = model(held, src, plain, by_source)
    library.write(data, kinds=kinds)
    merged = Catalog(spark_wh).get_table("db.t")
    want = stored_changelog(library, base)
    assert want and stored_changelog(merged, base) == want
    assert [s.commit_kind for s in merged.snapshots()] == [s.commit_kind for s in library.snapshots()]
    assert feed(merged, base) == feed(library, base)
    audit = [sorted(map(repr, x.inspect.audit_log(start=base, mode="changelog").to_pylist()))
             for x in (merged, library)]
    assert audit[0] == audit[1] and audit[0]
    assert merged.read().sort_by([("k", "ascending"), ("p", "ascending")]).equals(
        library.read().sort_by([("k", "ascending"), ("p", "ascending")]))
    if producer == "lookup" and not plain and not by_source:
        # without NOT MATCHED BY SOURCE only the source keys' target rows are read, not their buckets
        named = {(r[0], r[1]) for r in src}
        assert result["target_rows_read"] == sum((r["k"], r["p"]) in named for r in held.to_pylist()) < len(held)
    if producer == "lookup":
        assert all(e.file.level > 0 for e in merged.file_entries(merged.latest_snapshot()))


@pytest.mark.parametrize("producer, partitioned, options, shuffle, by_source", [
    ("lookup", False, {}, False, True),
    ("lookup", True, {"changelog-producer.row-deduplicate": "true"}, True, True),
    ("lookup", False, {"changelog-producer.row-deduplicate": "true",
                       "changelog-producer.row-deduplicate-ignore-fields": "w"}, False, True),
    ("input", True, {}, False, True),
    ("lookup", False, {}, False, False),
    ("lookup", True, {"changelog-producer.row-deduplicate": "true"}, True, False),
    # Paimon's other bucket functions: every replaced row must be in its key's bucket (the read would hold it twice)
    ("input", True, {"bucket-function.type": "hive"}, True, True),
    ("lookup", True, {"bucket-function.type": "mod"}, False, True),
    # deletion vectors: the rows move up with the vectors marked, in the COMPACT snapshot carrying the changelog
    ("lookup", True, {"deletion-vectors.enabled": "true"}, False, True),
    ("lookup", False, {"deletion-vectors.enabled": "true"}, True, False),
    ("input", True, {"deletion-vectors.enabled": "true"}, True, True),
])
def test_general_merge_writes_the_producers_changelog(spark, tmp_path, producer, partitioned, options, shuffle,
                                                      by_source):
    merge_and_compare(spark, tmp_path, producer, partitioned, options, plain=False, shuffle=shuffle,
                      by_source=by_source)


@pytest.mark.parametrize("producer, driver, options", [
    ("lookup", False, {}), ("lookup", True, {}), ("input", False, {}), ("input", True, {}),
    ("lookup", False, {"deletion-vectors.enabled": "true"}), ("lookup", True, {"deletion-vectors.enabled": "true"})])
def test_plain_upsert_writes_the_producers_changelog(spark, tmp_path, producer, driver, options):
    merge_and_compare(spark, tmp_path, producer, True, options, plain=True, driver=driver)


@pytest.mark.parametrize("plain", [False, True])
def test_merge_describes_level0_rows_no_changelog_described_yet(spark, tmp_path, plain):
    """Rows a writer left at level 0 (here: written before the table had a producer) are in no changelog yet:
    the merge describes them with its own changes and moves them up, as the library's lookup write does."""
    merge_and_compare(spark, tmp_path, "lookup", False, {}, plain=plain, late=True)


def test_merge_without_by_source_clauses_reads_only_its_keys_of_level0_rows(spark, tmp_path):
    """The same with the target's rows still at level 0: the keys' rows are read and merged from every level."""
    merge_and_compare(spark, tmp_path, "lookup", False, {}, plain=False, late=True, by_source=False)


@pytest.mark.parametrize("plain", [False, True])
def test_a_write_only_target_leaves_its_changelog_to_the_compaction(spark, tmp_path, plain):
    """`write-only`: the merge compacts nothing (no changelog, no level-up, as Paimon's writers then do); the
    table's compaction then describes the merged rows exactly as it does those of the library's own write."""
    spark_wh, library_wh = str(tmp_path / "spark"), str(tmp_path / "library")
    make_target(spark_wh, "lookup", False, {"write-only": "true"}).maintenance.compact()
    shutil.copytree(spark_wh, library_wh)
    library = Catalog(library_wh).get_table("db.t")
    base = library.latest_snapshot().id
    src = source_rows()
    source_file = str(tmp_path / "source.parquet")
    pq.write_table(rows(SCHEMA, [r[:4] for r in src]) if plain else rows(SOURCE, src), source_file)
    spec = {"target": "db.t", "warehouse": spark_wh, "source": source_file, "commit_user": "m",
            "commit_identifier": 1}
    if not plain:
        spec["clauses"] = [c.to_dict() for c in CLAUSES]
    assert run_merge(spark, spec)["status"] == "committed"
    data, kinds = model(library.read(), src, plain)
    library.write(data, kinds=kinds)
    merged = Catalog(spark_wh).get_table("db.t")
    for t in (merged, library):
        assert [s.commit_kind for s in t.snapshots() if s.id > base] == ["APPEND"]
        assert stored_changelog(t, base) == {}
        assert any(e.file.level == 0 for e in t.file_entries(t.latest_snapshot()))
        t.maintenance.compact()
    want = stored_changelog(library, base)
    assert want and {k - base: v for k, v in stored_changelog(merged, base).items()} == \
        {k - base: v for k, v in want.items()}
    assert feed(merged, base) == feed(library, base)
    assert merged.read().sort_by([("k", "ascending"), ("p", "ascending")]).equals(
        library.read().sort_by([("k", "ascending"), ("p", "ascending")]))
