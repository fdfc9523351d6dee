"""Schema evolution as Paimon's ``ALTER TABLE`` does it: changes applied to the latest schema, written as the
next `schema/schema-<id+1>` file with create-if-absent.

Changes (made with the `SchemaChange` factory methods, the names pypaimon uses):

* ``add_column(name, type)``: a nullable column with a new field id (``highestFieldId + 1``), last, or before
  the partition columns when the table sets ``add-column-before-partition``;
* ``rename_column(name, new_name)``: the field keeps its id, so data files written before read their values under
  the new name; the primary key and the ``bucket-key``, ``sequence.field`` and ``fields.<name>.*`` options follow
  the rename;
* ``drop_column(name)``: the field and its id leave the schema; a column added later under the same name has a
  new id and reads NULL in files written before;
* ``update_column_type(name, type)``: widening only (see `widens`), nullability kept.

Like Paimon, partition columns cannot be renamed, dropped or retyped, and primary-key columns cannot be dropped or
retyped (they can be renamed: keys are matched by field id too, and their values, hence buckets, stay the same).
Paimon also allows explicit, lossy casts (``BIGINT`` to ``INT``, ``STRING`` to
``INT``) unless ``disable-explicit-type-casting`` is set; this library only widens, so no value ever changes.
Files written by other engines after such a change are still read (see evolution.py).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import Sequence

import pyarrow as pa

from .errors import SchemaChangeError, UnsupportedTableError
from .options import TableOptions
from .schema import DataField, SchemaManager, TableSchema
from .types import arrow_to_paimon, normalize_arrow, paimon_to_arrow, split_nullability
from .values import option_boolean

__all__ = ["SchemaChange", "SchemaChangeError", "apply_schema_changes", "commit_schema_changes", "widens"]

MAX_ATTEMPTS = 10
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}
_MAX_LENGTH = 2147483647
# Options whose value names columns (comma-separated); a column they name cannot be dropped.
_COLUMN_OPTIONS = ("bucket-key", "sequence.field", "rowkind.field")
_RENAMED_OPTIONS = ("bucket-key", "sequence.field")


@dataclass(frozen=True)
class SchemaChange:
    """One change: `action` is add / rename / drop / update_type; build them with the factory methods."""

    action: str
    name: str
    new_name: str | None = None
    type: str | None = None
    description: str | None = None

    @classmethod
    def add_column(cls, name: str, data_type: pa.DataType | str, comment: str | None = None) -> "SchemaChange":
        return cls("add", name, type=_type_string(data_type, name), description=comment)

    @classmethod
    def rename_column(cls, name: str, new_name: str) -> "SchemaChange":
        return cls("rename", name, new_name=new_name)

    @classmethod
    def drop_column(cls, name: str) -> "SchemaChange":
        return cls("drop", name)

    @classmethod
    def update_column_type(cls, name: str, data_type: pa.DataType | str) -> "SchemaChange":
        return cls("update_type", name, type=_type_string(data_type, name))


def _type_string(data_type: pa.DataType | str, name: str) -> str:
    """Paimon's spelling of a type given as Arrow or as a Paimon type string; refused if unsupported."""
    if isinstance(data_type, pa.DataType):
        if pa.types.is_nested(data_type):
            raise SchemaChangeError(f"column {name!r}: nested types (ARRAY, MAP, ROW) cannot be added or changed "
                                    "here; create the table with them or alter it in Spark or Flink")
        text = arrow_to_paimon(normalize_arrow(data_type), True, name)
        assert isinstance(text, str)  # atomic types are strings
        return text
    if not isinstance(data_type, str) or not data_type.strip():
        raise SchemaChangeError(f"column {name!r}: the type must be a pyarrow type or a Paimon type string, "
                                f"not {data_type!r}")
    text = re.sub(r"\s+", " ", data_type.strip().upper())
    try:
        paimon_to_arrow(text, name)
    except UnsupportedTableError as e:
        raise SchemaChangeError(str(e)) from None
    return text


def _length(base: str) -> int:
    """The length of a CHAR/VARCHAR/BINARY/VARBINARY type (STRING and BYTES: the maximum)."""
    if base in ("STRING", "BYTES"):
        return _MAX_LENGTH
    m = re.fullmatch(r"(?:VAR)?(?:CHAR|BINARY)(?:\((\d+)\))?", base)
    if m is None:
        raise ValueError(f"{base} is not a character or binary type")
    return int(m.group(1) or 1)


def _timestamp_precision(base: str) -> int:
    m = re.search(r"\((\d)\)", base)
    return int(m.group(1)) if m else 6


def widens(old: str, new: str) -> bool:
    """Whether every value of Paimon type `old` is exactly representable in `new` (nullability aside)."""
    old_base, new_base = split_nullability(old)[0].upper(), split_nullability(new)[0].upper()
    a, b = paimon_to_arrow(old_base)[0], paimon_to_arrow(new_base)[0]
    if pa.types.is_string(a) or pa.types.is_binary(a):
        # CHAR(n) widens to VARCHAR/STRING, never the other way (CHAR pads to its length).
        fixed_old, fixed_new = old_base.startswith(("CHAR", "BINARY")), new_base.startswith(("CHAR", "BINARY"))
        return a == b and (fixed_old or not fixed_new) and _length(new_base) >= _length(old_base)
    if pa.types.is_timestamp(a):
        return pa.types.is_timestamp(b) and (a.tz is None) == (b.tz is None) and \
            _timestamp_precision(new_base) >= _timestamp_precision(old_base)
    if a == b:
        return True
    if pa.types.is_integer(a):
        if pa.types.is_integer(b):
            return bool(b.bit_width > a.bit_width)
        if pa.types.is_floating(b):
            return bool(a.bit_width <= (16 if pa.types.is_float32(b) else 32))  # within the mantissa: 24 or 53 bits
        if pa.types.is_decimal(b):
            return bool(b.precision - b.scale >= _INT_DIGITS[a.bit_width])
        return False
    if pa.types.is_floating(a):
        return pa.types.is_float64(b)
    if pa.types.is_decimal(a) and pa.types.is_decimal(b):
        return bool(b.scale >= a.scale and b.precision - b.scale >= a.precision - a.scale)
    return False


def _given(value: str | None, what: str, change: SchemaChange) -> str:
    if value is None:
        raise SchemaChangeError(f"{change!r} has no {what}; build it with SchemaChange.add_column, rename_column, "
                                "drop_column or update_column_type")
    return value


def _find(fields: list[DataField], name: str, identifier: str) -> int:
    for i, f in enumerate(fields):
        if f.name == name:
            return i
    raise SchemaChangeError(f"Column {name} does not exist in the {identifier} table "
                            f"(columns: {[f.name for f in fields]}).")


def _absent(fields: list[DataField], name: str, identifier: str) -> None:
    if not isinstance(name, str) or not name:
        raise SchemaChangeError(f"a column name must be a non-empty string, not {name!r}")
    if any(f.name == name for f in fields):
        raise SchemaChangeError(f"Column {name} already exists in the {identifier} table.")


def _rename_in_options(options: dict[str, str], old: str, new: str) -> dict[str, str]:
    def rename(names: str) -> str:
        return ",".join(new if n.strip() == old else n for n in names.split(","))

    out = {}
    for key, value in options.items():
        if key in _RENAMED_OPTIONS:
            value = rename(value)
        elif key.startswith("fields."):
            names, dot, suffix = key[len("fields."):].rpartition(".")
            if dot and old in names.split(","):
                key = f"fields.{rename(names)}.{suffix}"
            if suffix == "sequence-group":
                value = rename(value)
        out[key] = value
    return out


def _option_users(options: dict[str, str], name: str) -> list[str]:
    return [k for k in _COLUMN_OPTIONS if name in [n.strip() for n in options.get(k, "").split(",")]]


def apply_schema_changes(old: TableSchema, changes: Sequence[SchemaChange], identifier: str) -> TableSchema:
    """The schema after `changes` (in order), with the next id; SchemaChangeError for a change Paimon refuses."""
    if not changes:
        raise SchemaChangeError("no schema change given")
    fields = list(old.fields)
    highest = old.highest_field_id
    primary, partition = list(old.primary_keys), set(old.partition_keys)
    options = dict(old.options)
    for change in changes:
        if not isinstance(change, SchemaChange):
            raise SchemaChangeError(f"{change!r} is not a SchemaChange; build changes with SchemaChange.add_column, "
                                    "rename_column, drop_column or update_column_type")
        name = change.name
        if change.action == "add":
            type_text = _given(change.type, "type", change)
            _absent(fields, name, identifier)
            if not split_nullability(type_text)[1]:
                raise SchemaChangeError(f"Column {name} cannot specify NOT NULL in the {identifier} table.")
            highest += 1
            field = DataField(highest, name, type_text, change.description)
            at = len(fields)
            if option_boolean(options.get("add-column-before-partition", "false"), "add-column-before-partition") \
                    and partition:
                at = next(i for i, f in enumerate(fields) if f.name in partition)
            fields.insert(at, field)
        elif change.action == "rename":
            new_name = _given(change.new_name, "new_name", change)
            i = _find(fields, name, identifier)
            if name in partition:
                raise SchemaChangeError(f"Cannot rename partition column: [{name}]")
            if "rowkind.field" in _option_users(options, name):
                raise SchemaChangeError(f"Cannot rename column {name}: option rowkind.field names it")
            _absent(fields, new_name, identifier)
            fields[i] = replace(fields[i], name=new_name)
            primary = [new_name if k == name else k for k in primary]
            options = _rename_in_options(options, name, new_name)
        elif change.action == "drop":
            i = _find(fields, name, identifier)
            if name in partition or name in primary:
                raise SchemaChangeError(f"Cannot drop partition key or primary key: [{name}]")
            users = _option_users(options, name)
            if users:
                raise SchemaChangeError(f"Cannot drop column {name}: option(s) {users} of the table name it")
            if len(fields) == 1:
                raise SchemaChangeError("Cannot drop all fields in table")
            del fields[i]
        elif change.action == "update_type":
            new_type = _given(change.type, "type", change)
            i = _find(fields, name, identifier)
            if name in partition:
                raise SchemaChangeError(f"Cannot update partition column: [{name}]")
            if name in primary:
                raise SchemaChangeError("Cannot update primary key")
            f = fields[i]
            if not isinstance(f.type, str):
                raise SchemaChangeError(f"column {name!r}: the type of a nested column (ARRAY, MAP, ROW) cannot be "
                                        "changed here; alter it in Spark or Flink")
            base, nullable = split_nullability(f.type)
            new_base = split_nullability(new_type)[0]
            if not widens(base, new_base):
                raise SchemaChangeError(f"Column type {name}[{f.type}] cannot be converted to {new_base} without "
                                        "losing information (only widening type changes are supported).")
            fields[i] = replace(f, type=new_base if nullable else f"{new_base} NOT NULL")
        else:
            raise SchemaChangeError(f"unknown schema change {change.action!r}")
    new = TableSchema(id=old.id + 1, fields=tuple(fields), highest_field_id=highest,
                      partition_keys=old.partition_keys, primary_keys=tuple(primary), options=options,
                      comment=old.comment, time_millis=int(time.time() * 1000))
    new.validate()
    TableOptions.parse(new.options, bool(new.primary_keys))
    return new


def commit_schema_changes(manager: SchemaManager, changes: Sequence[SchemaChange], identifier: str) -> TableSchema:
    """Apply `changes` to the latest schema and write it as the next schema file; a concurrent change that
    took that id first is read and the changes are applied again on top of it, as Paimon's commitChanges does."""
    for _ in range(MAX_ATTEMPTS):
        latest = manager.latest()
        if latest is None:
            raise SchemaChangeError(f"table {identifier!r} has no schema")
        new = apply_schema_changes(latest, changes, identifier)
        if manager.create(new):
            return new
    raise SchemaChangeError(f"gave up after {MAX_ATTEMPTS} attempts: other writers keep changing the schema")
