"""`changelog-producer = input`: the rows a write receives, with their kinds, are its changelog.

As Paimon's write buffer does, every input row is kept (several changes of one key give several changelog rows,
in the order they win), sorted by key, each with its own sequence number; the data file keeps only the newest
version of each key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import pyarrow as pa

from ..manifest import FILE_SOURCE_APPEND, DataFileMeta
from .rows import write_changelog

if TYPE_CHECKING:
    from ..table import Table


def input_changelog(table: "Table", partition: tuple, bucket: int, rows: pa.Table,
                    dictionary: Sequence[str] | None = None) -> list[DataFileMeta]:
    """The changelog file of one bucket's input `rows` (table columns, `_SEQUENCE_NUMBER`, `_VALUE_KIND`, sorted
    by key then version); `dictionary`: see `write_changelog`."""
    return write_changelog(table, partition, bucket, rows, FILE_SOURCE_APPEND, dictionary)
