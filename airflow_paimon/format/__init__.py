"""A pure-Python (pyarrow + fastavro) library that reads and writes Apache Paimon tables.

    from airflow_paimon.format import Catalog
    table = Catalog("/data/warehouse").get_table("sales.orders")
    table.read(tag="2026-11-20")
"""

from .catalog import Catalog
from .commit import CommitId, Transaction
from .commit_message import CommitMessage
from .errors import (
    CommitConflictError,
    CorruptFileError,
    DuplicateKeyError,
    InvalidDataError,
    InvalidOptionError,
    InvalidValueError,
    MergeClauseError,
    PaimonError,
    PeriodMismatchError,
    SchemaChangeError,
    SchemaMismatchError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UnsafeStoreError,
    UnsupportedTableError,
)
from .scan import Split
from .schema_change import SchemaChange
from .snapshot import Snapshot
from .table import Table
from .tag_file import Tag

__all__ = [
    "Catalog", "Table", "Snapshot", "Tag", "Split", "CommitId", "CommitMessage", "Transaction", "SchemaChange",
    # every error the library raises on purpose, all under PaimonError
    "PaimonError", "TableNotFoundError", "TableAlreadyExistsError", "UnsupportedTableError",
    "SchemaMismatchError", "SchemaChangeError", "InvalidOptionError", "InvalidValueError",
    "InvalidDataError", "DuplicateKeyError",
    "SnapshotNotFoundError", "SnapshotExpiredError", "TagNotFoundError", "TagAlreadyExistsError",
    "CorruptFileError", "CommitConflictError", "UnsafeStoreError", "PeriodMismatchError", "MergeClauseError",
]
