"""Parquet files spliced from the encoded column chunks of others (format/parquet_splice.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_paimon.format.parquet_splice import (
    PLAIN_COLUMN_CODECS,
    ParquetParts,
    SpliceError,
    plain_int32_file,
    splice,
)

SCHEMA = pa.schema([("k", pa.int64(), False), ("kind", pa.int8(), False), ("s", pa.string()), ("d", pa.float64()),
                    ("b", pa.binary())])
KIND = pa.schema([SCHEMA.field("kind")])   # a replacing column is declared as the one it replaces


def comparable(table: pa.Table) -> pa.Table:
    """NaN as a number that compares equal to itself (Table.equals holds NaN unequal to NaN)."""
    d = table.column("d")
    return table.set_column(3, SCHEMA.field("d"), pc.if_else(pc.is_nan(d), -1.0, d))


def encode(table: pa.Table, row_group_size: int, **options) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", store_schema=False, row_group_size=row_group_size, **options)
    return sink.getvalue().to_pybytes()


def rows(rng: np.random.Generator, n: int, start: int) -> pa.Table:
    strings = [None if x < 5 else f"value-{x:04d}-" * int(x % 4) for x in rng.integers(0, 60, n)]
    doubles = [None if x < 0.1 else float("nan") if x > 0.95 else float(x) for x in rng.random(n)]
    return pa.table({"k": pa.array(np.arange(start, start + n), pa.int64()),
                     "kind": pa.array(rng.integers(0, 4, n), pa.int8()),
                     "s": pa.array(strings, pa.string()), "d": pa.array(doubles, pa.float64()),
                     "b": pa.array([bytes([x % 256]) * int(x % 7) for x in rng.integers(0, 500, n)], pa.binary())},
                    schema=SCHEMA)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(0, 300), st.lists(st.integers(1, 300), min_size=1, max_size=3),
       st.integers(1, 120), st.lists(st.integers(1, 120), min_size=3, max_size=3), st.booleans(),
       st.sampled_from([None, *PLAIN_COLUMN_CODECS]))
def test_a_spliced_file_reads_as_its_parts_with_the_replaced_columns(seed, first_rows, later_rows, first_group,
                                                                      groups, dictionary, plain):
    # `plain`: the replacing columns made by plain_int32_file with that codec, not by pyarrow's writer
    rng = np.random.default_rng(seed)
    first = rows(rng, first_rows, 0)
    options = {"use_dictionary": ["kind", "s"] if dictionary else False}
    later, expected = [], [first]
    start = first_rows
    for i, n in enumerate(later_rows):
        part = rows(rng, n, start)
        start += n
        size = groups[i]
        kinds = pa.table({"kind": pa.array(rng.integers(0, 4, n), pa.int8())}, schema=KIND)
        parts = ParquetParts(encode(part, size, **options))
        kind_file = encode(kinds, size, **options) if plain is None else \
            plain_int32_file("kind", kinds.column(0).to_numpy(), [g.num_rows for g in parts.row_groups], plain)
        later.append((parts, {1: (ParquetParts(kind_file), 0)}))
        expected.append(part.set_column(1, SCHEMA.field("kind"), kinds.column(0)))
    data = splice(ParquetParts(encode(first, first_group, **options)), later)

    got = pq.read_table(pa.BufferReader(data))
    assert comparable(got).equals(comparable(pa.concat_tables(expected)))
    meta = pq.read_metadata(pa.BufferReader(data))
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert 0 not in sizes   # the empty group pyarrow writes for no rows is left out
    assert sum(sizes) == meta.num_rows == got.num_rows
    # each row group reads alone from its own offsets, with the statistics its chunks were written with
    reader = pq.ParquetFile(pa.BufferReader(data))
    position = 0
    for i in range(meta.num_row_groups):
        group = reader.read_row_group(i)
        assert comparable(group).equals(comparable(got.slice(position, group.num_rows)))
        stats = meta.row_group(i).column(0).statistics
        assert (stats.min, stats.max) == (position, position + group.num_rows - 1)
        position += group.num_rows


@pytest.mark.parametrize("codec", sorted(PLAIN_COLUMN_CODECS))
def test_a_plain_int32_file_reads_as_its_values_in_its_row_groups(codec):
    values = np.random.default_rng(3).integers(-2**31, 2**31, 1000).astype(np.int64)
    values[:300] = 2   # a run, as a changelog's kinds have
    data = plain_int32_file("v", values, [0, 400, 600], codec)
    meta = pq.read_metadata(pa.BufferReader(data))
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [0, 400, 600]
    column = meta.row_group(2).column(0)
    assert (column.physical_type, column.compression, column.is_stats_set) == \
        ("INT32", {"none": "UNCOMPRESSED"}.get(codec, codec.upper()), False)
    got = pq.read_table(pa.BufferReader(data))
    assert got.schema == pa.schema([pa.field("v", pa.int32(), nullable=False)])
    assert got.column(0).to_pylist() == values.tolist()
    with pytest.raises(ValueError, match="1000 values in row groups of 999 rows"):
        plain_int32_file("v", values, [999], codec)


def test_offsets_that_grow_past_a_varint_byte_are_written_longer():
    # A chunk moved from offset 4 to past 2 MiB needs a longer varint for each offset: the footer grows, and
    # every field after the offset still reads.
    rng = np.random.default_rng(7)
    text = rng.bytes(300_000 * 8).hex()
    big = pa.table({"k": pa.array(np.arange(300_000), pa.int64()), "kind": pa.array(np.zeros(300_000, np.int8)),
                    "s": pa.array([text[i:i + 16] for i in range(0, 300_000 * 16, 16)]),
                    "d": pa.array(rng.random(300_000)), "b": pa.array([b"x"] * 300_000)}, schema=SCHEMA)
    small = rows(rng, 10, 300_000)
    data = splice(ParquetParts(encode(big, 1_000_000)), [(ParquetParts(encode(small, 100)), {})])
    assert len(data) > 2 * 1024 * 1024
    assert comparable(pq.read_table(pa.BufferReader(data))).equals(comparable(pa.concat_tables([big, small])))


def test_row_groups_that_do_not_match_are_refused():
    rng = np.random.default_rng(1)
    part = rows(rng, 100, 0)
    kinds = pa.table({"kind": pa.array(np.zeros(100, np.int8))}, schema=KIND)
    with pytest.raises(SpliceError, match="row groups differ"):
        splice(ParquetParts(encode(part, 100)), [(ParquetParts(encode(part, 50)),
                                                  {1: (ParquetParts(encode(kinds, 100)), 0)})])


def test_footers_it_does_not_splice_are_refused():
    part = rows(np.random.default_rng(2), 10, 0)
    with pytest.raises(SpliceError, match="not a Parquet file"):
        ParquetParts(b"PAR1 not parquet")
    with pytest.raises(SpliceError, match="sorting columns"):
        ParquetParts(encode(part, 10, sorting_columns=[pq.SortingColumn(0)]))
