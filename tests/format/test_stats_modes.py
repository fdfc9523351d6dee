"""Paimon's statistics modes: `metadata.stats-mode`, `fields.<name>.stats-mode`, `metadata.stats-mode.per.level`,
`changelog-file.stats-mode`, `metadata.stats-keep-first-n-columns` and `metadata.stats-dense-store` decide what each
new file's manifest entry keeps, as Paimon's writers decide it; reads with filters stay exact whatever was kept."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_paimon.format.binary_row import deserialize_row
from airflow_paimon.format.errors import InvalidOptionError
from airflow_paimon.format.stats_modes import StatsMode, StatsPolicy

from .upkeep_helpers import tree_digest

SCHEMA = pa.schema([("k", pa.string()), ("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.int32()))])
LONG = "customer-" + "z" * 30   # longer than truncate(16)


def rows(keys: list[str], b: str = LONG) -> pa.Table:
    return pa.table({"k": keys, "a": list(range(len(keys))), "b": [f"{b}{k}" for k in keys],
                     "c": [[1, 2]] * (len(keys) - 1) + [None]}, schema=SCHEMA)


def value_stats(table, meta) -> dict[str, tuple]:
    """Column -> (min, max, null count) as the manifest entry keeps them."""
    written = table.schema_by_id(meta.schema_id)
    names = list(meta.value_stats_cols) if meta.value_stats_cols is not None else written.field_names
    types = [written.arrow_type(n) for n in names]
    lows = deserialize_row(meta.value_stats.min_values, types)
    highs = deserialize_row(meta.value_stats.max_values, types)
    return {n: (lo, hi, nc) for n, lo, hi, nc in zip(names, lows, highs, meta.value_stats.null_counts)}


def key_stats(table, meta) -> tuple:
    written = table.schema_by_id(meta.schema_id)
    types = [written.arrow_type(k) for k in written.trimmed_primary_keys]
    return (deserialize_row(meta.key_stats.min_values, types)[0], deserialize_row(meta.key_stats.max_values, types)[0],
            meta.key_stats.null_counts[0])


def only_file(table):
    (entry,) = table.file_entries(table.latest_snapshot())
    return entry.file


@pytest.mark.parametrize("text, mode", [
    ("none", StatsMode("none")), ("COUNTS", StatsMode("counts")), ("Full", StatsMode("full")),
    ("truncate(16)", StatsMode("truncate", 16)), ("TRUNCATE(3)", StatsMode("truncate", 3)),
])
def test_modes_are_read_in_any_case(text, mode):
    assert StatsMode.parse(text, "metadata.stats-mode") == mode


@pytest.mark.parametrize("text", ["truncate(0)", "truncate()", "truncate(-1)", "partial", " none", ""])
def test_a_bad_mode_is_named(text):
    with pytest.raises(InvalidOptionError, match=r"metadata.stats-mode: .* is not a statistics mode"):
        StatsMode.parse(text, "metadata.stats-mode")


def test_what_each_mode_keeps():
    assert StatsMode("none").apply("a", "b", 1) == (None, None, None)
    assert StatsMode("counts").apply("a", "b", 1) == (None, None, 1)
    assert StatsMode("full").apply(LONG, LONG, 0) == (LONG, LONG, 0)
    assert StatsMode("truncate", 4).apply("abcdef", "abcdef", 2) == ("abcd", "abce", 2)
    assert StatsMode("truncate", 4).apply(b"ab\xff\xff\xff", b"ab\xff\xff\xff", 0) == (b"ab\xff\xff", b"ac", 0)
    assert StatsMode("truncate", 4).apply(7, 9, 0) == (7, 9, 0)
    # no upper bound exists for the prefix: Paimon then keeps no bound at all, only the count
    assert StatsMode("truncate", 2).apply("aaa", "\U0010ffff\U0010ffff!", 3) == (None, None, 3)


def test_which_mode_each_column_takes():
    policy = StatsPolicy.from_options({
        "metadata.stats-mode": "counts", "fields.d.stats-mode": "full", "fields._KEY_k.stats-mode": "none",
        "metadata.stats-keep-first-n-columns": "2", "metadata.stats-mode.per.level": "0:none, 5:full",
        "changelog-file.stats-mode": "truncate(8)"})
    columns = ["_KEY_k", "_SEQUENCE_NUMBER", "_VALUE_KIND", "k", "a", "b", "d", "e"]
    counts, none, full = StatsMode("counts"), StatsMode("none"), StatsMode("full")
    system = StatsMode("truncate", 128)
    # the field's own mode first (system columns too), and it counts toward the first two columns kept; the other
    # system columns truncate(128) and do not count; past the first two counted columns, none
    assert policy.column_modes(columns, counts) == [none, system, system, counts, none, none, full, none]
    assert policy.file_mode(0) == none
    assert policy.file_mode(5) == full
    assert policy.file_mode(3) == counts
    assert policy.file_mode(0, changelog=True) == StatsMode("truncate", 8)
    assert policy.file_mode(None) == counts   # an append table's files: metadata.stats-mode alone
    assert StatsPolicy.from_options({}).file_mode(0, changelog=True) == StatsMode("truncate", 16)


def test_default_truncates_value_strings_to_16_and_keys_to_128(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options={"bucket": "1"})
    key = "k" * 200
    t.write(rows([key]))
    meta = only_file(t)
    assert meta.value_stats_cols == ("k", "a", "b")   # dense: the ARRAY column keeps nothing, as in Paimon
    stats = value_stats(t, meta)
    assert stats["a"] == (0, 0, 0)
    assert stats["b"] == (LONG[:16], LONG[:15] + chr(ord(LONG[15]) + 1), 0)
    assert stats["k"] == ("k" * 16, "k" * 15 + "l", 0)
    assert key_stats(t, meta) == ("k" * 128, "k" * 127 + "l", 0)


def test_dense_store_off_keeps_every_column(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"],
                             options={"bucket": "1", "metadata.stats-dense-store": "false"})
    t.write(rows(["x", "y"]))
    meta = only_file(t)
    assert meta.value_stats_cols is None
    assert value_stats(t, meta)["c"] == (None, None, None)


@pytest.mark.parametrize("dense", ["true", "false"])
def test_none_keeps_nothing_of_the_values_but_the_keys(catalog, dense):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options={
        "bucket": "1", "metadata.stats-mode": "none", "metadata.stats-dense-store": dense})
    t.write(rows(["x", "y"]))
    meta = only_file(t)
    if dense == "true":
        assert meta.value_stats_cols == ()
        assert value_stats(t, meta) == {}
    else:
        assert meta.value_stats_cols is None
        assert set(value_stats(t, meta).values()) == {(None, None, None)}
    assert key_stats(t, meta) == ("x", "y", 0)


def test_counts_full_and_a_field_of_its_own(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options={
        "bucket": "1", "metadata.stats-mode": "counts", "fields.b.stats-mode": "full"})
    t.write(rows(["x", "y"]))
    stats = value_stats(t, only_file(t))
    assert stats == {"k": (None, None, 0), "a": (None, None, 0), "b": (LONG + "x", LONG + "y", 0)}


def test_keep_first_n_columns(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options={
        "bucket": "1", "metadata.stats-keep-first-n-columns": "2"})
    t.write(rows(["x", "y"]))
    meta = only_file(t)
    assert meta.value_stats_cols == ("k", "a")


def test_append_tables_follow_the_table_mode(catalog):
    t = catalog.create_table("db.t", SCHEMA, options={"metadata.stats-mode": "full",
                                                      "metadata.stats-mode.per.level": "0:none"})
    t.write(rows(["x", "y"]))
    meta = only_file(t)
    assert meta.value_stats_cols == ("k", "a", "b")
    assert value_stats(t, meta)["b"] == (LONG + "x", LONG + "y", 0)


def test_the_mode_of_each_level(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options={
        "bucket": "1", "metadata.stats-mode.per.level": "0:none", "metadata.stats-mode": "full"})
    t.write(rows(["x", "y"]))
    assert only_file(t).value_stats_cols == ()
    t.write(rows(["z"]))
    t.maintenance.compact()
    meta = only_file(t)
    assert meta.level == 5
    assert value_stats(t, meta)["b"] == (LONG + "x", LONG + "z", 0)


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_changelog_files_take_the_changelog_mode(catalog, producer):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": producer, "changelog-file.stats-mode": "none"})
    t.write(rows(["x", "y"]))
    t.write(rows(["y", "z"], b="other"))
    if producer == "full-compaction":
        t.maintenance.compact()
    changelog = [e.file for s in t.snapshots() for e in t.changelog_entries(s)]
    assert changelog
    assert {m.value_stats_cols for m in changelog} == {()}
    assert {key_stats(t, m)[2] for m in changelog} == {0}   # the system columns keep theirs
    data = [e.file for e in t.file_entries(t.latest_snapshot())]
    assert {m.value_stats_cols for m in data} == {("k", "a", "b")}


@pytest.mark.parametrize("options", [
    {"metadata.stats-mode": "none"},
    {"metadata.stats-mode": "counts"},
    {"metadata.stats-mode": "truncate(2)"},
    {"metadata.stats-keep-first-n-columns": "1", "metadata.stats-dense-store": "false"},
])
@pytest.mark.parametrize("primary_keys", [["k"], []])
def test_filtered_reads_are_exact_whatever_the_files_keep(catalog, options, primary_keys):
    extra = {"bucket": "2"} if primary_keys else {}
    t = catalog.create_table("db.t", SCHEMA, primary_keys=primary_keys, options={**options, **extra})
    for batch in (["a1", "a2", "a3"], ["b1", "b2"], ["a2", "c1"]):
        t.write(rows(batch, b=batch[0][0]))
    every = t.read()
    for expr in (pc.field("b") == "aa2", pc.field("b") >= "b", pc.field("k") < "a3", pc.field("a") == 1):
        want = every.filter(expr).sort_by("k").to_pylist()
        assert t.read(filter=expr).sort_by("k").to_pylist() == want, (expr, options)


@pytest.mark.parametrize("key, value", [
    ("metadata.stats-mode", "truncate(0)"),
    ("metadata.stats-mode", "some"),
    ("fields.b.stats-mode", "maximal"),
    ("changelog-file.stats-mode", "truncate(x)"),
    ("metadata.stats-mode.per.level", "zero:none"),
    ("metadata.stats-mode.per.level", "0:partial"),
    ("metadata.stats-keep-first-n-columns", "many"),
    ("metadata.stats-dense-store", "perhaps"),
])
def test_bad_statistics_options_are_refused_before_anything_is_written(catalog, key, value):
    before = tree_digest(catalog.warehouse)
    with pytest.raises(InvalidOptionError, match=key):
        catalog.create_table("db.bad", SCHEMA, primary_keys=["k"], options={"bucket": "1", key: value})
    assert tree_digest(catalog.warehouse) == before
    assert not catalog.table_exists("db.bad")
