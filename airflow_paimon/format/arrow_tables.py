"""Two Arrow table helpers for the paths a write or a lookup takes once per bucket.

pyarrow's own spellings cost more than the work around them there: `Schema.empty_table()` builds each string
column from an empty Python list (measured: 0.2 ms for a schema of six columns, a fresh schema each time), and
`Table.cast` casts every column even when the table already has the schema (70 us for six columns). Both hold
the GIL, which the buckets of a write, worked on in parallel threads, then wait for in turn.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["conformed", "no_rows"]


def no_rows(schema: pa.Schema) -> pa.Table:
    """A table of `schema` without rows (and without chunks: concatenated to others, it adds none)."""
    return pa.Table.from_batches([], schema=schema)


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` cast to `schema` (names and order alike), without a cast when it has that schema already."""
    return table if table.schema.equals(schema) else table.cast(schema)
