"""The merge application's arguments as one value, from and to JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from airflow_paimon.format import values
from airflow_paimon.merge import MergeClause

__all__ = ["MergeSpec", "SOURCE_FORMATS"]

SOURCE_FORMATS = ("parquet", "csv", "json", "orc", "avro", "paimon", "sql")


@dataclass
class MergeSpec:
    """Everything the merge application needs; JSON-serialisable (`to_dict`/`from_dict`)."""

    target: str
    warehouse: str
    source: Any
    source_format: str = "parquet"
    source_options: dict[str, str] = field(default_factory=dict)
    on: Any = None
    clauses: Any = None
    commit_user: str | None = None
    commit_identifier: int | None = None
    reapply: bool = False
    reapply_token: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    num_tasks: int | None = None
    honour_sequence_field: bool = True
    single_task_bytes: int = 32 << 20
    driver_bytes: int = 64 << 20

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "MergeSpec":
        known = set(cls.__dataclass_fields__)
        unknown = set(doc) - known
        if unknown:
            raise ValueError(f"unknown merge arguments {sorted(unknown)}; known: {sorted(known)}")
        missing = [k for k in ("target", "warehouse", "source") if not doc.get(k)]
        if missing:
            raise ValueError(f"the merge needs {missing}")
        spec = cls(**dict(doc))
        spec.reapply = values.boolean(spec.reapply, "reapply", default=False)
        spec.honour_sequence_field = values.boolean(spec.honour_sequence_field, "honour_sequence_field",
                                                    default=True)
        spec.single_task_bytes = values.count(spec.single_task_bytes, "single_task_bytes", minimum=0)
        spec.driver_bytes = values.count(spec.driver_bytes, "driver_bytes", minimum=0)
        if spec.commit_identifier is not None:
            spec.commit_identifier = values.count(spec.commit_identifier, "commit_identifier", minimum=None)
        if spec.num_tasks is not None:
            spec.num_tasks = values.count(spec.num_tasks, "num_tasks")
        spec.source_format = (spec.source_format or "parquet").lower()
        if spec.source_format not in SOURCE_FORMATS:
            raise ValueError(f"source_format {spec.source_format!r} is not one of {SOURCE_FORMATS}")
        return spec

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if isinstance(self.clauses, list):
            out["clauses"] = [c.to_dict() if isinstance(c, MergeClause) else c for c in self.clauses]
        return out
