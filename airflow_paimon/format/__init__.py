"""A pure-Python (pyarrow + fastavro) library that reads and writes Apache Paimon tables.

    from airflow_paimon.format import Catalog
    table = Catalog("/data/warehouse").get_table("sales.orders")
    table.read(tag="2026-11-20")
"""

from .catalog import Catalog
from .commit import CommitId, CommitMessage, Transaction
from .errors import (
                     CommitConflictError,
                     InvalidDataError,
                     InvalidOptionError,
                     PaimonError,
                     SchemaMismatchError,
                     SnapshotExpiredError,
                     SnapshotNotFoundError,
                     TableAlreadyExistsError,
                     TableNotFoundError,
                     TagNotFoundError,
                     UnsupportedTableError,
)
from .scan import Split
from .schema_change import SchemaChange, SchemaChangeError
from .snapshot import Snapshot
from .table import Table
from .tags import Tag

__all__ = [
    "Catalog", "Table", "Snapshot", "Tag", "Split", "CommitId", "CommitMessage", "Transaction",
    "PaimonError", "TableNotFoundError", "TableAlreadyExistsError", "UnsupportedTableError",
    "SchemaMismatchError", "InvalidOptionError", "SnapshotNotFoundError", "SnapshotExpiredError", "TagNotFoundError",
    "CommitConflictError", "InvalidDataError", "SchemaChange", "SchemaChangeError",
]
