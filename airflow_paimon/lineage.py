"""Lineage in plain terms: how a Paimon table or a folder of files is named as a dataset, what a task's datasets
hold, and which source columns a MERGE writes each target column from.

Datasets are named as Paimon's own lineage names them (``LineageUtils`` of its Flink integration): the
namespace is the warehouse (a local one as a ``file://`` URI, credentials left out) and the name is
``database.table``. A dataset's version is its snapshot id. No Airflow and no OpenLineage here:
:mod:`airflow_paimon.operators.lineage` turns these values into OpenLineage's facets when Airflow asks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from airflow_paimon.format.table import Table
    from airflow_paimon.merge import MergeClause

__all__ = [
    "LineageDataset", "added_rows", "column_sources", "merged_columns", "path_dataset", "table_dataset",
    "warehouse_namespace",
]

# Table options worth seeing beside the lineage: what decides the table's kind, tags, retention and changelog.
_REPORTED_OPTION_PREFIXES = ("bucket", "changelog", "merge-engine", "sequence.field", "snapshot.", "tag.",
                             "partition.", "file.format", "deletion-vectors", "consumer.")
_SECRET_WORDS = ("secret", "password", "token", "key", "credential")


def warehouse_namespace(warehouse: str) -> str:
    """The warehouse as a URI without credentials: ``s3://bucket/wh``, ``file:///data/wh`` for a local path."""
    if "://" not in warehouse:
        return "file://" + os.path.abspath(warehouse).rstrip("/")
    parts = urlsplit(warehouse)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def path_dataset(path: str) -> tuple[str, str]:
    """(namespace, name) of files outside a table, as OpenLineage names them: ``file`` / ``s3://bucket`` and
    the path."""
    if "://" not in path:
        return "file", os.path.abspath(path)
    parts = urlsplit(path)
    return f"{parts.scheme}://{parts.hostname or ''}", parts.path or "/"


@dataclass
class LineageDataset:
    """One dataset of a task's lineage, in plain terms (turned into OpenLineage's classes only when sent)."""

    namespace: str
    name: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    version: str | None = None
    rows: int | None = None
    files: int | None = None
    size: int | None = None
    paimon: dict[str, Any] = field(default_factory=dict)
    # target column -> [(namespace, name, source column)], for an output written from inputs
    column_lineage: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)


def table_dataset(warehouse: str, table: Table, snapshot_id: int | None = None) -> LineageDataset:
    """A Paimon table as a dataset: its schema, keys and upkeep options, and its version when known."""
    schema = table.schema()
    options = {k: v for k, v in schema.options.items()
               if k.startswith(_REPORTED_OPTION_PREFIXES) and not any(w in k.lower() for w in _SECRET_WORDS)}
    return LineageDataset(
        namespace=warehouse_namespace(warehouse), name=table.identifier,
        fields=[(f.name, str(f.type)) for f in schema.fields],
        version=None if snapshot_id is None else str(snapshot_id),
        paimon={"primaryKeys": list(schema.primary_keys), "partitionKeys": list(schema.partition_keys),
                "options": options},
    )


def column_sources(expression: str, alias: str) -> list[str]:
    """The columns of ``alias`` (``s`` or ``t``) a Spark SQL expression reads, in order of first use."""
    import sqlglot
    from sqlglot import exp

    seen: list[str] = []
    for column in sqlglot.parse_one(expression, read="spark").find_all(exp.Column):
        if column.table == alias and column.name not in seen:
            seen.append(column.name)
    return seen


def added_rows(dataset: LineageDataset, table: Table, snapshot_id: int) -> None:
    """The rows and files the commit of ``snapshot_id`` added, as the output's statistics."""
    snapshot = table.snapshot_manager.snapshot(snapshot_id)
    dataset.rows = snapshot.delta_record_count
    dataset.paimon["commitKind"] = snapshot.commit_kind


def merged_columns(target: Sequence[str], clauses: Sequence[MergeClause]) -> dict[str, list[tuple[str, str]]]:
    """Target column -> [(alias, column)] the MERGE clauses write it from: ``*`` copies the same-named source
    column; an expression reads the columns it names."""
    out: dict[str, list[tuple[str, str]]] = {}

    def add(column: str, alias: str, source: str) -> None:
        if (alias, source) not in out.setdefault(column, []):
            out[column].append((alias, source))

    for clause in clauses:
        assignments = clause.assignments
        if assignments is None:
            continue
        if isinstance(assignments, str):  # "*"
            for column in target:
                add(column, "s", column)
            continue
        for column, expression in assignments.items():
            for alias in ("s", "t"):
                for source in column_sources(str(expression), alias):
                    add(column, alias, source)
    return out
