"""The filesystem catalog: `<warehouse>/<database>.db/<table>/`, as Paimon's FileSystemCatalog lays it out."""

from __future__ import annotations

import re
from typing import Sequence

import pyarrow as pa

from .errors import PaimonError, TableAlreadyExistsError, TableNotFoundError, UnsupportedTableError
from .fileio import FileIO
from .schema import SchemaManager, schema_from_arrow
from .table import Table

DB_SUFFIX = ".db"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


def split_identifier(identifier: str) -> tuple[str, str]:
    parts = identifier.split(".")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise PaimonError(f"table identifier {identifier!r} must look like 'database.table'")
    return parts[0], parts[1]


class Catalog:
    """Tables of one warehouse (a local path or a URI such as s3://bucket/warehouse)."""

    def __init__(self, warehouse: str, options: dict[str, str] | None = None):
        if not warehouse:
            raise PaimonError("a warehouse path or URI is required")
        self.options = dict(options or {})
        self.io = FileIO(warehouse, self.options)
        self.warehouse = warehouse.rstrip("/") if "://" in warehouse else _abs(warehouse)

    def database_path(self, database: str) -> str:
        if not _NAME.match(database):
            raise PaimonError(f"database name {database!r} is not valid")
        return f"{self.warehouse}/{database}{DB_SUFFIX}"

    def table_path(self, identifier: str) -> str:
        db, name = split_identifier(identifier)
        return f"{self.database_path(db)}/{name}"

    def create_database(self, name: str, ignore_if_exists: bool = False) -> None:
        path = self.database_path(name)
        if self.io.exists(path) and not ignore_if_exists:
            raise PaimonError(f"database {name!r} already exists")
        self.io.mkdirs(path)

    def list_databases(self) -> list[str]:
        return sorted(d[: -len(DB_SUFFIX)] for d in self.io.list_subdirs(self.warehouse) if d.endswith(DB_SUFFIX))

    def list_tables(self, database: str) -> list[str]:
        path = self.database_path(database)
        return sorted(t for t in self.io.list_subdirs(path) if SchemaManager(self.io, f"{path}/{t}").ids())

    def create_table(self, identifier: str, schema: pa.Schema, primary_keys: Sequence[str] = (),
                     partition_keys: Sequence[str] = (), options: dict[str, str] | None = None,
                     comment: str | None = None, ignore_if_exists: bool = False) -> Table:
        db, _ = split_identifier(identifier)
        if not self.io.exists(self.database_path(db)):
            raise TableNotFoundError(f"database {db!r} does not exist; create it with create_database({db!r})")
        opts = {str(k): str(v) for k, v in (options or {}).items()}
        if primary_keys and "bucket" not in opts:
            opts["bucket"] = "1"
        ts = schema_from_arrow(schema, partition_keys, primary_keys, opts, comment)
        from .options import TableOptions
        parsed = TableOptions.parse(ts.options, bool(ts.primary_keys))
        parsed.check_fields(ts.field_names)
        refusal = "; ".join(r for r in (parsed.write_refusal, ts.cross_partition_refusal()) if r)
        if refusal:
            raise UnsupportedTableError(f"cannot create {identifier}: this library could not write to it: {refusal}")
        path = self.table_path(identifier)
        manager = SchemaManager(self.io, path)
        if manager.ids():
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(f"table {identifier!r} already exists")
        if not manager.create(ts):
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(f"table {identifier!r} already exists")
        return self.get_table(identifier)

    def get_table(self, identifier: str) -> Table:
        return Table(self.io, self.table_path(identifier), identifier)

    def table_exists(self, identifier: str) -> bool:
        return bool(SchemaManager(self.io, self.table_path(identifier)).ids())


def _abs(path: str) -> str:
    import os
    if path.startswith("file://"):
        path = path[len("file://"):]
    return os.path.abspath(path)
