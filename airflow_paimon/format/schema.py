"""Table schemas as Paimon stores them: `schema/schema-<id>` JSON files, newest id wins."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

import pyarrow as pa

from .errors import InvalidOptionError, SchemaMismatchError, UnsupportedTableError
from .fileio import FileIO
from .types import (
    PaimonType,
    arrow_field_with_ids,
    arrow_to_paimon,
    is_nested,
    nested_field_ids,
    normalize_arrow,
    paimon_to_arrow,
    type_text,
)

SCHEMA_VERSION = 3
KEY_FIELD_PREFIX = "_KEY_"
KEY_FIELD_ID_START = (2**31 - 1) // 2
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
SEQUENCE_NUMBER_ID = 2**31 - 2
VALUE_KIND = "_VALUE_KIND"
VALUE_KIND_ID = 2**31 - 3


@dataclass(frozen=True)
class DataField:
    id: int
    name: str
    type: PaimonType
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type}
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class TableSchema:
    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: dict[str, str]
    comment: str | None = None
    time_millis: int = field(default_factory=lambda: int(time.time() * 1000))
    version: int = SCHEMA_VERSION

    # ---- derived views -------------------------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaMismatchError(f"column {name!r} is not in the table schema {self.field_names}")

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """The primary key without partition columns: what data files store as `_KEY_` columns."""
        trimmed = [k for k in self.primary_keys if k not in self.partition_keys]
        return trimmed if trimmed else list(self.primary_keys)

    def arrow_schema(self) -> pa.Schema:
        return self._arrow_schema

    def logical_arrow_schema(self) -> pa.Schema:
        """The schema users see: no field-id metadata."""
        return self._logical_arrow_schema

    # A schema never changes once made (a change makes a new one), so its Arrow forms are built once: reads and
    # change feeds ask for them per file and per bucket.
    @cached_property
    def _arrow_schema(self) -> pa.Schema:
        return pa.schema([arrow_field_with_ids(f.name, f.type, f.id) for f in self.fields])

    def kv_file_schema(self) -> pa.Schema:
        """The Parquet schema of a primary-key table's data and changelog files: the trimmed keys as `_KEY_`
        columns, `_SEQUENCE_NUMBER`, `_VALUE_KIND`, then the table's columns."""
        return self._kv_file_schema

    @cached_property
    def _kv_file_schema(self) -> pa.Schema:
        value = self.arrow_schema()
        fields = []
        for k in self.trimmed_primary_keys:
            fields.append(pa.field(KEY_FIELD_PREFIX + k, value.field(k).type, nullable=False,
                                   metadata={b"PARQUET:field_id": str(KEY_FIELD_ID_START + self.field(k).id).encode()}))
        fields.append(pa.field(SEQUENCE_NUMBER, pa.int64(), nullable=False,
                               metadata={b"PARQUET:field_id": str(SEQUENCE_NUMBER_ID).encode()}))
        fields.append(pa.field(VALUE_KIND, pa.int8(), nullable=False,
                               metadata={b"PARQUET:field_id": str(VALUE_KIND_ID).encode()}))
        keys = set(self.primary_keys)
        for f in value:
            # Delete rows carry only their key, so non-key columns are stored nullable.
            fields.append(f if f.name in keys else f.with_nullable(True))
        return pa.schema(fields)

    @cached_property
    def _logical_arrow_schema(self) -> pa.Schema:
        out = []
        for f in self.fields:
            t, nullable = paimon_to_arrow(f.type, f.name)
            out.append(pa.field(f.name, t, nullable))
        return pa.schema(out)

    def arrow_type(self, name: str) -> pa.DataType:
        self.field(name)   # an unknown name is an error naming the columns
        found: pa.DataType = self._logical_arrow_schema.field(name).type
        return found

    # ---- JSON ------------------------------------------------------------------------------------
    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [f.to_json() for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            doc["comment"] = self.comment
        doc["timeMillis"] = self.time_millis
        return json.dumps(doc, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "TableSchema":
        doc = json.loads(text)
        fields = tuple(
            DataField(f["id"], f["name"], f["type"], f.get("description")) for f in doc["fields"]
        )
        return cls(
            id=doc["id"],
            fields=fields,
            highest_field_id=doc.get("highestFieldId", max(
                (i for f in fields for i in (f.id, *nested_field_ids(f.type))), default=-1)),
            partition_keys=tuple(doc.get("partitionKeys") or ()),
            primary_keys=tuple(doc.get("primaryKeys") or ()),
            options={str(k): str(v) for k, v in (doc.get("options") or {}).items()},
            comment=doc.get("comment"),
            time_millis=doc.get("timeMillis", 0),
            version=doc.get("version", 1),
        )

    def unsupported_columns(self) -> list[str]:
        """Why columns cannot be read or written here (nested types, TIME, ...): the metadata of such a table is
        still usable, its data is not."""
        out = []
        for f in self.fields:
            try:
                paimon_to_arrow(f.type, f.name)
            except UnsupportedTableError as e:
                out.append(str(e))
        return out

    def cross_partition_refusal(self) -> str | None:
        """Why a cross-partition upsert table (Paimon's global index of keys to partitions) is neither read nor
        written here; None for other tables."""
        if self.primary_keys and not set(self.partition_keys) <= set(self.primary_keys):
            return (f"it is a cross-partition upsert table (its primary key {list(self.primary_keys)} leaves out "
                    f"partition keys of {list(self.partition_keys)})")
        return None

    def validate(self) -> None:
        """Refuse a schema whose keys do not fit its columns."""
        names = self.field_names
        for k in self.partition_keys:
            if k not in names:
                raise InvalidOptionError(f"partition key {k!r} is not a column of {names}")
        for k in self.primary_keys:
            if k not in names:
                raise InvalidOptionError(f"primary key {k!r} is not a column of {names}")
        bucket_key = tuple(k.strip() for k in str(self.options.get("bucket-key", "")).split(",") if k.strip())
        for what, keys in (("primary key", self.primary_keys), ("partition", self.partition_keys),
                           ("bucket-key", tuple(k for k in bucket_key if k in names))):
            for k in keys:
                t = self.field(k).type
                if is_nested(t):
                    # Paimon's SchemaValidation refuses them too: keys are compared and hashed as atomic values.
                    raise InvalidOptionError(f"{what} column {k!r} has the nested type {type_text(t)}; Paimon "
                                             f"allows only atomic types in {what} columns")
        if self.primary_keys:
            missing = [k for k in self.partition_keys if k not in self.primary_keys]
            # Paimon allows it with a dynamic bucket (cross-partition upsert), which is read here but not written.
            if missing and str(self.options.get("bucket", "-1")).strip() != "-1":
                raise InvalidOptionError(
                    f"primary key {list(self.primary_keys)} must contain the partition keys {missing}")
            if set(self.primary_keys) == set(self.partition_keys):
                raise InvalidOptionError("primary key must not be the same as the partition keys")


def schema_from_arrow(
    schema: pa.Schema,
    partition_keys: Sequence[str],
    primary_keys: Sequence[str],
    options: dict[str, str],
    comment: str | None = None,
) -> TableSchema:
    fields = []
    # Top-level columns keep ids 0..n-1; fields of nested ROW types are numbered after them.
    nested_ids = iter(range(len(schema), 2**31))
    for i, f in enumerate(schema):
        nullable = f.nullable and f.name not in primary_keys
        fields.append(DataField(i, f.name, arrow_to_paimon(normalize_arrow(f.type), nullable, f.name,
                                                           lambda: next(nested_ids))))
    ts = TableSchema(
        id=0,
        fields=tuple(fields),
        highest_field_id=next(nested_ids) - 1,
        partition_keys=tuple(partition_keys),
        primary_keys=tuple(primary_keys),
        options={str(k): str(v) for k, v in options.items()},
        comment=comment,
    )
    ts.validate()
    return ts


class SchemaManager:
    def __init__(self, io: FileIO, table_path: str):
        self.io = io
        self.dir = f"{table_path}/schema"

    def path(self, schema_id: int) -> str:
        return f"{self.dir}/schema-{schema_id}"

    def ids(self) -> list[int]:
        out = []
        for info in self.io.list_dir(self.dir):
            name = info.path.rsplit("/", 1)[-1]
            if name.startswith("schema-") and name[7:].isdigit():
                out.append(int(name[7:]))
        return sorted(out)

    def latest(self) -> TableSchema | None:
        ids = self.ids()
        return self.schema(ids[-1]) if ids else None

    def latest_id(self) -> int | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def schema(self, schema_id: int) -> TableSchema:
        try:
            return TableSchema.from_json(self.io.read_text(self.path(schema_id)))
        except FileNotFoundError:
            raise UnsupportedTableError(f"schema file schema-{schema_id} is missing") from None

    def create(self, schema: TableSchema) -> bool:
        return self.io.create_exclusive(self.path(schema.id), schema.to_json().encode())
