"""Which version of a key wins and which row kinds are written: sequence.field (NULLs, sort order, several fields,
duplicates in one batch), rowkind.field and ignore-delete, as Apache Paimon's readers and writers decide them."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.data_file import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from airflow_paimon.format.errors import InvalidDataError, InvalidOptionError

from .upkeep_helpers import tree_digest

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def batch(rows, schema=SCHEMA) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def values(table) -> dict:
    return {r["id"]: r["v"] for r in table.read().to_pylist()}


def stored_kinds(table) -> dict:
    """id -> _VALUE_KIND of every row in the data files (latest file last)."""
    out: dict = {}
    for e in sorted(table.file_entries(table.latest_snapshot()), key=lambda e: e.file.min_sequence_number):
        path = table.data_file_path(table.partition_codec.from_bytes(e.partition), e.bucket, e.file)
        for r in pq.read_table(path, columns=["id", "_VALUE_KIND"]).to_pylist():
            out.setdefault(r["id"], []).append(r["_VALUE_KIND"])
    return out


def seq_table(catalog, name="db.seq", schema=SCHEMA, **options):
    opts = {"bucket": "2", "sequence.field": "ts"}
    opts.update(options)
    return catalog.create_table(name, schema, primary_keys=["id"], options=opts)


def test_a_null_sequence_value_is_older_than_any_value(catalog):
    t = seq_table(catalog)
    t.write(batch([(1, 5, "first"), (2, None, "first"), (3, None, "first"), (4, 5, "first")]))
    t.write(batch([(1, None, "second"), (2, 3, "second"), (3, None, "second"), (4, 5, "second")]))
    # A NULL loses to any value in either commit order; equal values (NULL and NULL too) fall back to the commit.
    assert values(t) == {1: "first", 2: "second", 3: "second", 4: "second"}


def test_one_batch_keeps_the_row_with_the_highest_sequence_value(catalog):
    t = seq_table(catalog)
    t.write(batch([(1, 3, "a"), (1, 1, "b"), (1, None, "c"),
                   (2, None, "a"), (2, 2, "b"),
                   (3, 7, "a"), (3, 7, "b"),
                   (4, None, "a"), (4, None, "b")]))
    # Ties keep the later row, as Paimon's write buffer orders them by their sequence numbers.
    assert values(t) == {1: "a", 2: "b", 3: "b", 4: "b"}
    assert sum(e.file.row_count for e in t.file_entries(t.latest_snapshot())) == 4


def test_descending_sort_order_keeps_the_smallest_value_and_nulls_stay_oldest(catalog):
    t = seq_table(catalog, **{"sequence.field.sort-order": "descending"})
    t.write(batch([(1, 5, "a"), (1, 9, "b"), (2, None, "a"), (2, 9, "b"), (3, 4, "a")]))
    assert values(t) == {1: "a", 2: "b", 3: "a"}
    t.write(batch([(1, 7, "later"), (2, None, "later"), (3, 1, "later")]))
    assert values(t) == {1: "a", 2: "b", 3: "later"}
    t.maintenance.compact()
    assert values(catalog.get_table("db.seq")) == {1: "a", 2: "b", 3: "later"}


def test_several_sequence_fields_compare_field_by_field(catalog):
    schema = pa.schema([("id", pa.int64()), ("a", pa.int32()), ("b", pa.float64()), ("v", pa.string())])
    t = seq_table(catalog, schema=schema, **{"sequence.field": " a, b"})
    nan = math.nan
    t.write(batch([(1, 1, 9.0, "old"), (2, 2, None, "new"), (3, 2, 1.0, "old"), (4, 2, nan, "new"),
                   (5, None, 9.0, "old"), (6, 1, 0.0, "new")], schema))
    t.write(batch([(1, 2, 0.0, "new"), (2, 2, 5.0, "newer"), (3, 2, 0.5, "lost"), (4, 2, 1e300, "lost"),
                   (5, 0, None, "new"), (6, 1, -0.0, "lost")], schema))
    # Floats compare as Java's Double.compare: NaN above every number, -0.0 below 0.0.
    assert values(t) == {1: "new", 2: "newer", 3: "old", 4: "new", 5: "new", 6: "new"}


@pytest.mark.parametrize("options, message", [
    ({"sequence.field.sort-order": "down"}, "sequence.field.sort-order"),
    ({"sequence.field": "ts,ts"}, "more than once"),
    ({"sequence.field": "ts,"}, "empty field name"),
    ({"sequence.field": "missing"}, "'missing' is not in the table schema"),
    ({"rowkind.field": "op"}, "rowkind.field: column 'op'"),
    ({"ignore-delete": "yes"}, "ignore-delete"),
])
def test_bad_ordering_options_are_refused_before_the_table_exists(catalog, options, message):
    with pytest.raises(InvalidOptionError, match=message):
        seq_table(catalog, **options)
    assert not catalog.table_exists("db.seq")


KIND_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("op", pa.string())])


def kind_table(catalog, **options):
    opts = {"bucket": "2", "rowkind.field": "op"}
    opts.update(options)
    return catalog.create_table("db.kinds", KIND_SCHEMA, primary_keys=["id"], options=opts)


def test_rowkind_field_gives_each_written_row_its_kind(catalog):
    t = kind_table(catalog)
    t.write(batch([(i, "v0", "+I") for i in range(6)], KIND_SCHEMA))
    t.write(batch([(1, "v1", "-D"), (2, "v1", "+u"), (3, "v1", "-U"), (4, "v1", "+U"), (7, "v1", "-D")], KIND_SCHEMA))
    assert values(t) == {0: "v0", 2: "v1", 4: "v1", 5: "v0"}
    kinds = stored_kinds(t)
    assert kinds[1][-1] == DELETE and kinds[3][-1] == UPDATE_BEFORE and kinds[2][-1] == UPDATE_AFTER
    assert kinds[0] == [INSERT]


@pytest.mark.parametrize("ops, message", [
    (["+I", None], "1 row\\(s\\) have a null 'op'"),
    (["+I", "delete"], "first: 'delete'"),
    (["+I", " -D"], "first: ' -D'"),
])
def test_rowkind_field_without_a_row_kind_is_refused_and_nothing_changes(catalog, ops, message):
    t = kind_table(catalog)
    t.write(batch([(9, "v0", "+I")], KIND_SCHEMA))
    before = tree_digest(t.path)
    with pytest.raises(InvalidDataError, match=message):
        t.write(batch([(i, "v1", op) for i, op in enumerate(ops)], KIND_SCHEMA))
    assert tree_digest(t.path) == before


def test_explicit_kinds_take_precedence_over_rowkind_field(catalog):
    t = kind_table(catalog)
    t.write(batch([(1, "v0", "+I"), (2, "v0", "+I")], KIND_SCHEMA))
    t.delete(pa.table({"id": [1]}))
    assert values(t) == {2: "v0"}


@pytest.mark.parametrize("key", ["ignore-delete", "deduplicate.ignore-delete", "partial-update.ignore-delete"])
def test_ignore_delete_writes_no_retraction_and_reads_past_old_ones(catalog, key):
    t = kind_table(catalog, **{key: "true", "bucket": "1"})
    t.write(batch([(i, "v0", "+I") for i in range(5)], KIND_SCHEMA))
    t.write(batch([(1, "v1", "-D"), (2, "v1", "-U"), (3, "v1", "+U"), (4, "gone", "-D"), (4, "v1", "+I")],
                  KIND_SCHEMA))
    assert values(t) == {0: "v0", 1: "v0", 2: "v0", 3: "v1", 4: "v1"}
    assert all(k in (INSERT, UPDATE_AFTER) for ks in stored_kinds(t).values() for k in ks)
    # Retractions already in files (written before the option was set, or by an older writer) are skipped:
    # the newest insert or update of the key wins.
    retraction = t.new_write().write_bucket((), 0, batch([(0, "v0", "-D")], KIND_SCHEMA), pa.array([DELETE], pa.int8()),
                                            t.next_sequence_numbers()[((), 0)])
    t.commit([retraction])
    assert stored_kinds(t)[0] == [INSERT, DELETE]
    assert values(t)[0] == "v0"
    t.maintenance.compact()
    assert values(catalog.get_table("db.kinds"))[0] == "v0"
    with pytest.raises(InvalidDataError, match="ignore-delete = true"):
        t.delete(pa.table({"id": [0]}))


def test_an_explicit_false_ignore_delete_wins_over_its_older_names(catalog):
    t = kind_table(catalog, **{"ignore-delete": "false", "deduplicate.ignore-delete": "true"})
    t.write(batch([(1, "v0", "+I"), (2, "v0", "+I")], KIND_SCHEMA))
    t.write(batch([(1, "v1", "-D")], KIND_SCHEMA))
    assert values(t) == {2: "v0"}


def test_ignore_update_before_drops_only_update_before_rows(catalog):
    t = kind_table(catalog, **{"ignore-update-before": "true"})
    t.write(batch([(1, "v0", "+I"), (2, "v0", "+I")], KIND_SCHEMA))
    t.write(batch([(1, "v1", "-U"), (2, "v1", "-D")], KIND_SCHEMA))
    assert values(t) == {1: "v0"}


def test_an_append_table_refuses_retractions_unless_it_ignores_them(catalog):
    log = catalog.create_table("db.log", KIND_SCHEMA, options={"rowkind.field": "op"})
    with pytest.raises(InvalidDataError, match="append-only table takes"):
        log.write(batch([(1, "a", "+I"), (2, "b", "-D")], KIND_SCHEMA))
    assert log.latest_snapshot() is None
    quiet = catalog.create_table("db.quiet", KIND_SCHEMA, options={"rowkind.field": "op", "ignore-delete": "true"})
    quiet.write(batch([(1, "a", "+I"), (2, "b", "-D"), (3, "c", "+U")], KIND_SCHEMA))
    assert sorted(quiet.read().column("id").to_pylist()) == [1, 3]


def test_sequence_order_is_vectorised_over_many_keys(catalog):
    """A random batch of many duplicate versions against a plain Python model of Paimon's comparator."""
    rng = np.random.default_rng(3)
    n = 20000
    ids = rng.integers(0, 500, n)
    ts = rng.integers(0, 50, n).astype(object)
    ts[rng.random(n) < 0.2] = None
    t = seq_table(catalog, bucket="3")
    t.write(batch([(int(i), s, f"r{j}") for j, (i, s) in enumerate(zip(ids, ts))]))
    model: dict = {}
    for j, (i, s) in enumerate(zip(ids, ts)):
        rank = (s is not None, s if s is not None else 0, j)
        if int(i) not in model or rank >= model[int(i)][0]:
            model[int(i)] = (rank, f"r{j}")
    assert values(t) == {k: v for k, (_, v) in model.items()}
