"""Operators of the Paimon provider.

The tag, expiry and rollback operators run in the worker; the merge, compaction, orphan-cleanup and change-export
operators submit Spark applications (the last two also run in the worker when asked, or when small enough) and are
imported on first use (so that DAGs using only the former do not load the Spark provider).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_paimon.operators.expire import ExpireSnapshotsOperator
from airflow_paimon.operators.rollback import RollbackOperator
from airflow_paimon.operators.tags import CreateTagOperator, DeleteTagOperator

if TYPE_CHECKING:
    from airflow_paimon.operators.changes import ExportChangesOperator
    from airflow_paimon.operators.maintenance import CompactOperator, RemoveOrphanFilesOperator
    from airflow_paimon.operators.merge import MergeIncrementalOperator

_LAZY = {
    "MergeIncrementalOperator": "airflow_paimon.operators.merge",
    "CompactOperator": "airflow_paimon.operators.maintenance",
    "RemoveOrphanFilesOperator": "airflow_paimon.operators.maintenance",
    "ExportChangesOperator": "airflow_paimon.operators.changes",
}

__all__ = [
    "CompactOperator",
    "CreateTagOperator",
    "DeleteTagOperator",
    "ExpireSnapshotsOperator",
    "ExportChangesOperator",
    "MergeIncrementalOperator",
    "RemoveOrphanFilesOperator",
    "RollbackOperator",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
