"""Which version of a primary key wins, and which row kinds a write keeps: Paimon's rules, on whole Arrow arrays.

Versions of one key are ordered as Paimon's merge readers and write buffers order them: by the `sequence.field`
columns first, compared as Paimon's `UserDefinedSeqComparator` compares them (a NULL is below every value, in
either `sequence.field.sort-order`; with ``descending`` the other values compare the other way round; floats
compare as Java's `Double.compare`: -0.0 below 0.0, NaN above every number), then by `_SEQUENCE_NUMBER`. The
last version wins.

Rows written without explicit kinds take their kind from the `rowkind.field` column ('+I', '-U', '+U', '-D',
any case, as Paimon's `RowKindGenerator` maps them). `ignore-delete` drops -U and -D rows on write (Paimon's
`RowKindFilter`) and makes readers skip retractions already in files (Paimon's `DeduplicateMergeFunction`);
`ignore-update-before` drops -U rows on write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .data_file import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from .errors import InvalidDataError

if TYPE_CHECKING:
    from .options import TableOptions

KIND_NAMES = ("+I", "-U", "+U", "-D")   # index = the kind's byte in `_VALUE_KIND`


def version_sort_indices(data: pa.Table, leading: Sequence[str], seq_fields: Sequence[str], descending: bool,
                         trailing: Sequence[str] = ()) -> np.ndarray:
    """Stable row order by `leading` columns, then the sequence fields in Paimon's order, then `trailing`.

    Nulls get their place from a helper column (valid after null) and floats from integer keys, so the order is
    the same on every pyarrow version whatever its null and NaN placement."""
    cols: dict[str, pa.ChunkedArray | pa.Array] = {}
    sort_keys: list[tuple[str, Literal["ascending", "descending"]]] = []

    def add(col: pa.ChunkedArray | pa.Array, order: Literal["ascending", "descending"]) -> None:
        name = f"c{len(cols)}"
        cols[name] = col
        sort_keys.append((name, order))

    for name in leading:
        add(data.column(name), "ascending")
    order: Literal["ascending", "descending"] = "descending" if descending else "ascending"
    for name in seq_fields:
        col = data.column(name)
        if col.null_count:
            add(pc.is_valid(col), "ascending")
        add(_float_order(col) if pa.types.is_floating(col.type) else col, order)
    for name in trailing:
        add(data.column(name), "ascending")
    return pc.sort_indices(pa.table(cols), sort_keys=sort_keys).to_numpy()


def _float_order(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Unsigned integers ordered as Java's Float/Double.compare orders the floats: -0.0 below 0.0, every NaN
    equal and above infinity; nulls (placed by their own key) all 0."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    values = np.ascontiguousarray(col.to_numpy(zero_copy_only=False))
    bits = values.view(np.dtype(f"uint{values.dtype.itemsize * 8}"))
    sign = bits.dtype.type(1 << (values.dtype.itemsize * 8 - 1))
    keys = np.where(bits & sign, ~bits, bits | sign)
    keys[np.isnan(values)] = np.iinfo(bits.dtype).max
    if col.null_count:
        keys[pc.is_null(col).to_numpy(zero_copy_only=False)] = 0
    return pa.array(keys)


def kinds_from_field(data: pa.Table, field: str) -> pa.Array:
    """The `_VALUE_KIND` bytes named by the string column `field` of `data`."""
    if field not in data.column_names:
        raise InvalidDataError(f"rowkind.field: the rows have no column {field!r} to take their row kind from")
    col = data.column(field)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        raise InvalidDataError(f"rowkind.field: column {field!r} is {col.type}; row kinds need a string column")
    if col.null_count:
        raise InvalidDataError(f"rowkind.field: {col.null_count} row(s) have a null {field!r}; each row needs one "
                               f"of {', '.join(KIND_NAMES)}")
    codes = pc.index_in(pc.utf8_upper(col), value_set=pa.array(KIND_NAMES))
    if codes.null_count:
        first = int(np.flatnonzero(pc.is_null(codes).to_numpy(zero_copy_only=False))[0])
        raise InvalidDataError(f"rowkind.field: {codes.null_count} row(s) have a {field!r} that is no row kind "
                               f"(first: {col[first].as_py()!r}); expected one of {', '.join(KIND_NAMES)}")
    if isinstance(codes, pa.ChunkedArray):
        codes = codes.combine_chunks()
    return codes.cast(pa.int8())


def kinds_to_write(options: "TableOptions", data: pa.Table, kinds: pa.Array | pa.ChunkedArray | None,
                   append_only: bool = False) -> tuple[pa.Table, pa.Array | None]:
    """The rows a write keeps and their kinds (None: all +I), after `rowkind.field` and the ignore options.

    Explicit `kinds` (deletes, MERGE clauses, a kind column) take precedence over `rowkind.field`."""
    if kinds is None and options.rowkind_field:
        kinds = kinds_from_field(data, options.rowkind_field)
    if kinds is None:
        return data, None
    if isinstance(kinds, pa.ChunkedArray):
        kinds = kinds.combine_chunks()
    kinds = kinds.cast(pa.int8())
    codes = kinds.to_numpy(zero_copy_only=False)
    if options.ignore_delete:
        keep = (codes != DELETE) & (codes != UPDATE_BEFORE)
    elif options.ignore_update_before:
        keep = codes != UPDATE_BEFORE
    else:
        keep = None
    if keep is not None and not keep.all():
        mask = pa.array(keep)
        data, kinds, codes = data.filter(mask), kinds.filter(mask), codes[keep]
    if append_only:
        retract = (codes != INSERT) & (codes != UPDATE_AFTER)
        if retract.any():
            raise InvalidDataError(
                f"{int(retract.sum())} row(s) are {KIND_NAMES[int(codes[retract][0])]}: an append-only table takes "
                "+I and +U rows only (set ignore-delete = true to drop retractions)")
    return data, kinds
