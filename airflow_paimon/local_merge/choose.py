"""Which engine runs a MERGE: ``local`` (this process), ``spark``, or ``auto`` -- here when the source is local
Parquet and the source plus the target buckets it touches fit the memory budget, and every clause translates
exactly; otherwise on Spark. The decision and its reason go into the result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from airflow_paimon.format import Table
from airflow_paimon.format.errors import PaimonError

from .engine import DEFAULT_MEMORY_BUDGET, describe_budget, open_transaction, plan_local_merge
from .source import local_source, read_parquet
from .translate import NotTranslatable

__all__ = ["ENGINES", "LocalMergeRefused", "Decision", "merge_here_or_refuse"]

ENGINES = ("auto", "local", "spark")


class LocalMergeRefused(PaimonError):
    """``engine="local"`` was asked for a MERGE that only Spark can run (the message says why)."""


@dataclass
class Decision:
    """The result of a MERGE run here, or None and the reason Spark runs it."""

    result: dict[str, Any] | None
    reason: str


def merge_here_or_refuse(table: Table, source: Any, *, source_format: str | None = "parquet",
                         source_options: Mapping[str, str] | None = None, clauses: Any = None, on: Any = None,
                         commit_user: str | None = None, commit_identifier: int | None = None,
                         memory_budget: int = DEFAULT_MEMORY_BUDGET, engine: str = "auto",
                         honour_sequence_field: bool = True) -> Decision:
    """Run the MERGE here when `engine` allows and it can; otherwise the reason it needs Spark (``auto``) or
    LocalMergeRefused (``local``). Bad input raises the same errors as on Spark, before anything is written."""
    if engine not in ("auto", "local"):
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")

    def refuse(reason: str) -> Decision:
        if engine == "local":
            raise LocalMergeRefused(f"engine='local' cannot run this MERGE into {table.identifier}: {reason}; "
                                    "use engine='spark' (or 'auto', which chooses Spark)")
        return Decision(None, reason)

    tx = open_transaction(table, commit_user, commit_identifier)
    existing = tx.already_committed
    if existing is not None:
        return Decision({"target": table.identifier, "commit_user": commit_user,
                         "commit_identifier": commit_identifier, "status": "already_committed",
                         "snapshot_id": existing.id, "engine": "local",
                         "message": f"commit {commit_user!r}/{commit_identifier} is already in snapshot "
                                    f"{existing.id} of {table.identifier}; nothing to do"},
                        "the commit already landed")
    found = local_source(source, source_format, source_options)
    if found.files is None:
        return refuse(found.reason or "the source is not local Parquet files")
    if found.size * 3 > memory_budget:
        return refuse(f"the source files ({found.size / (1 << 20):.0f} MiB on disk) do not fit the "
                      f"{memory_budget / (1 << 20):.0f} MiB memory budget")
    data = read_parquet(found.files)
    if isinstance(data, str):
        return refuse(data)
    try:
        plan = plan_local_merge(table, data, clauses, on, tx=tx, honour_sequence_field=honour_sequence_field)
    except NotTranslatable as e:
        return refuse(str(e))
    if plan.needed_bytes > memory_budget:
        return refuse(f"the MERGE {describe_budget(plan, memory_budget)}")
    plan.details["source"] = found.describe()
    result = plan.run(memory_budget)
    reason = f"the MERGE {describe_budget(plan, memory_budget)}"
    result["engine_reason"] = reason
    return Decision(result, reason)
