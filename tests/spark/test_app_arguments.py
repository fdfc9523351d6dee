"""The Spark applications read their arguments (flags and spec JSON) as everything else does: with
airflow_paimon.format.values, so a bad one is refused naming the argument before any Spark work starts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_paimon.format import Catalog, InvalidValueError
from airflow_paimon.spark.common import load_spec
from airflow_paimon.spark.merge.spec import MergeSpec
from airflow_paimon.spark.merge_app import FLAGS as MERGE_FLAGS
from airflow_paimon.spark.orphans_app import run_remove_orphans

BASE = {"target": "db.t", "warehouse": "/w", "source": "/in"}


def test_merge_spec_flags_accept_every_form_once():
    spec = MergeSpec.from_dict(load_spec(["--spec", '{"target": "db.t", "warehouse": "/w", "source": "/in"}',
                                          "--reapply", "YES", "--honour-sequence-field", "off",
                                          "--num-tasks", "4", "--driver-bytes", "0"], MERGE_FLAGS))
    assert (spec.reapply, spec.honour_sequence_field, spec.num_tasks, spec.driver_bytes) == (True, False, 4, 0)
    assert MergeSpec.from_dict(dict(BASE, reapply="", num_tasks=4.0)).reapply is False


@pytest.mark.parametrize("extra, match", [
    ({"reapply": "maybe"}, "reapply: expected True or False"),
    ({"honour_sequence_field": "none"}, "honour_sequence_field: expected True or False"),
    ({"num_tasks": "2.5"}, "num_tasks: expected a whole number"),
    ({"num_tasks": 0}, "num_tasks: must be at least 1"),
    ({"driver_bytes": -1}, "driver_bytes: must be at least 0"),
])
def test_merge_spec_refuses_bad_arguments_by_name(extra, match):
    with pytest.raises(InvalidValueError, match=match):
        MergeSpec.from_dict(dict(BASE, **extra))


@pytest.mark.parametrize("extra, match", [
    ({"dry_run": "perhaps"}, "dry_run: expected True or False"),
    ({"older_than_age": "3 dayz"}, "older_than_age: expected a duration such as '7d'"),
    ({"older_than": "last week"}, "older_than: 'last week' is not a point in time"),
    ({"num_tasks": "many"}, "num_tasks: expected a whole number"),
])
def test_orphan_application_refuses_bad_arguments_before_spark_runs(tmp_path, extra, match):
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    spec = {"target": "db.t", "warehouse": str(tmp_path), **extra}
    with pytest.raises(InvalidValueError, match=match):
        run_remove_orphans(None, spec)  # no session: the arguments are refused before it is needed
