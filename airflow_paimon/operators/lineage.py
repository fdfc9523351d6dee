"""OpenLineage for the provider's operators: which Paimon tables (and files) a task read and wrote, at which
snapshot, with their schema, row counts and, for merges, which source columns each target column came from.

Airflow's OpenLineage provider calls ``get_openlineage_facets_on_start/_on_complete/_on_failure`` on an
operator that has them; the facets are built here only then, so nothing of OpenLineage is imported (nor needed)
when the provider is not installed.

Datasets are named by :mod:`airflow_paimon.lineage`. Facets of our own, under ``paimon``, carry what OpenLineage
has no standard facet for: the table's keys and options that drive its upkeep, and the tag or snapshot an
operator acted on. Secret-looking options are never sent.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_paimon.lineage import LineageDataset, added_rows, table_dataset

if TYPE_CHECKING:
    from airflow_paimon.format.table import Table
    from airflow_paimon.hooks.paimon import PaimonHook

__all__ = ["COMMIT_ASSET_ALIAS", "PaimonLineage"]

COMMIT_ASSET_ALIAS = "paimon_commits"
"""The asset alias through which the operators that commit data (merge, compaction) emit their table's asset
event, one per new snapshot; the asset is the one :class:`~airflow_paimon.operators.tags.CreateTagOperator`'s
events use, so a DAG scheduled on a table's asset runs after either."""

# What the ``paimon`` facet of a dataset holds.
PAIMON_FACET_FIELDS = ("primaryKeys", "partitionKeys", "options", "commitKind", "tag")


class PaimonLineage:
    """Mixin of the provider's operators (put it before the Airflow base class): OpenLineage facets from what
    the operator declares (:meth:`lineage`) and from its XCom result.

    The result is kept when ``execute`` returns: every subclass's ``execute`` is wrapped for that, because
    Airflow calls ``post_execute`` without the result, and reading the XCom back from inside the listener is a
    round trip that can fail where the task did not."""

    lineage_result: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        execute = cls.__dict__.get("execute")
        if execute is not None and not getattr(execute, "keeps_lineage_result", False):
            cls.execute = _keeping_result(execute)  # type: ignore[attr-defined]

    # whether the task's snapshot is a commit it made (its added rows are the output's statistics)
    commits_data = False

    def lineage_hook(self) -> PaimonHook:
        raise NotImplementedError

    def lineage(self, result: Mapping[str, Any] | None) -> tuple[list[LineageDataset], list[LineageDataset]]:
        """(inputs, outputs) of this task; ``result`` is its XCom value, None before it ran or when it failed.
        By default the operator's ``table`` is its output."""
        table = self.lineage_table()
        snapshot = (result or {}).get("snapshot_id") if isinstance(result, Mapping) else None
        out = table_dataset(self.lineage_hook().warehouse, table, snapshot)
        if isinstance(result, Mapping) and result.get("tag"):
            out.paimon["tag"] = result["tag"]
        if self.commits_data and isinstance(snapshot, int) and (result or {}).get("status") == "committed":
            added_rows(out, table, snapshot)
        return [], [out]

    def lineage_table(self, identifier: str | None = None) -> Table:
        return self.lineage_hook().get_table(identifier or getattr(self, "table"))

    def commit_outlets(self, outlets: Any) -> list[Any]:
        """``outlets`` plus the commit alias, for an operator that commits data (call it in ``__init__``)."""
        from airflow.sdk import AssetAlias

        out = list(outlets or [])
        if self.commits_data:
            out.append(AssetAlias(name=COMMIT_ASSET_ALIAS))
        return out

    def post_execute(self, context: Any, result: Any = None) -> None:
        """A commit's asset event: the table's asset through the commit alias, with the snapshot in ``extra``."""
        super().post_execute(context, result)  # type: ignore[misc]
        done = self.lineage_result
        events = context.get("outlet_events") if hasattr(context, "get") else None
        if not (self.commits_data and events is not None and isinstance(done, Mapping)
                and done.get("status") == "committed" and done.get("snapshot_id") is not None):
            return
        from airflow.sdk import AssetAlias

        from airflow_paimon.assets import table_asset

        hook = self.lineage_hook()
        identifier = str(done.get("target") or getattr(self, "table"))
        extra = {"table": identifier, "warehouse": hook.warehouse, "snapshot_id": done["snapshot_id"],
                 "operator": type(self).__name__, "commit_user": done.get("commit_user"),
                 "commit_identifier": done.get("commit_identifier")}
        asset = table_asset(hook.warehouse, identifier)
        events[AssetAlias(name=COMMIT_ASSET_ALIAS)].add(asset, extra=extra)
        getattr(self, "log").info("Asset event for %s: snapshot %s", asset.name, done["snapshot_id"])

    def get_openlineage_facets_on_start(self) -> Any:
        return self.openlineage_for(None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:  # noqa: ARG002
        result = self.lineage_result
        return self.openlineage_for(result if isinstance(result, Mapping) else {})

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:  # noqa: ARG002
        return self.openlineage_for(None)

    def openlineage_for(self, result: Mapping[str, Any] | None) -> Any:
        """OpenLineage's ``OperatorLineage`` of this task given its result (None: it has none, yet or at all)."""
        from airflow.providers.openlineage.extractors import OperatorLineage

        try:
            inputs, outputs = self.lineage(result)
        except Exception as exc:  # noqa: BLE001 - lineage never fails a task; the provider logs what is missing
            getattr(self, "log").warning("No OpenLineage datasets for this task: %s", exc)
            return OperatorLineage()
        return OperatorLineage(inputs=[_input(d) for d in inputs], outputs=[_output(d) for d in outputs])


def _keeping_result(execute: Any) -> Any:
    @functools.wraps(execute)
    def run(self: PaimonLineage, context: Any) -> Any:
        result = execute(self, context)
        self.lineage_result = result
        return result

    run.keeps_lineage_result = True  # type: ignore[attr-defined]
    return run


def _facets(d: LineageDataset) -> dict[str, Any]:
    from openlineage.client.facet_v2 import (
        column_lineage_dataset,
        dataset_version_dataset,
        schema_dataset,
    )

    facets: dict[str, Any] = {}
    if d.fields:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in d.fields])
    if d.version is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=d.version)
    if d.column_lineage:
        facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(fields={
            column: column_lineage_dataset.Fields(
                inputFields=[column_lineage_dataset.InputField(namespace=ns, name=name, field=src)
                             for ns, name, src in sources],
                transformationType="", transformationDescription="")
            for column, sources in d.column_lineage.items()})
    if d.paimon:
        facets["paimon"] = _custom_facet(d.paimon)
    return facets


@functools.cache
def _paimon_facet_class() -> Any:
    """OpenLineage's custom dataset facet for what Paimon adds (built on first use: OpenLineage is optional)."""
    import attr
    from openlineage.client.facet_v2 import DatasetFacet

    return attr.make_class("PaimonDatasetFacet", {name: attr.ib(default=None) for name in PAIMON_FACET_FIELDS},
                           bases=(DatasetFacet,))


def _custom_facet(values: Mapping[str, Any]) -> Any:
    return _paimon_facet_class()(**{k: v for k, v in values.items() if k in PAIMON_FACET_FIELDS})


def _input(d: LineageDataset) -> Any:
    from openlineage.client.event_v2 import InputDataset

    return InputDataset(namespace=d.namespace, name=d.name, facets=_facets(d))


def _output(d: LineageDataset) -> Any:
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import output_statistics_output_dataset

    stats: dict[str, Any] = {}
    if d.rows is not None or d.files is not None or d.size is not None:
        stats["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=d.rows, fileCount=d.files, size=d.size)
    return OutputDataset(namespace=d.namespace, name=d.name, facets=_facets(d), outputFacets=stats)


