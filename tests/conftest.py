"""Order of the whole suite: the slowest kinds of test first.

`make test` spreads test modules over the machine's cores; started first, the few long tests (end-to-end runs,
the Spark cluster, the object-store races, the benchmarks) run beside the many short ones instead of one of them
running alone at the end. Tests of one module keep their order."""

from __future__ import annotations

import os

import pytest

from airflow_paimon.format.lookup_files import LOOKUP_DIR_ENV

SLOWEST_FIRST = ("e2e", "cluster", "objectstore", "bench")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:  # noqa: ARG001
    items.sort(key=lambda item: 0 if any(item.get_closest_marker(m) for m in SLOWEST_FIRST) else 1)


# Spark's JVMs started by the tests' spark-submits compile with the quick JIT only (C1): such a JVM lives for
# one small job, and the optimising compiler's work (a third of a trivial job's processor time, measured here:
# 21 s against 14 s) would never pay off; the suite's spark-submits share two cores with the other tests.
SPARK_DEFAULTS = """spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1
spark.executor.extraJavaOptions -XX:TieredStopAtLevel=1
"""


@pytest.fixture(autouse=True, scope="session")
def spark_defaults(tmp_path_factory: pytest.TempPathFactory):
    """A Spark configuration folder (`SPARK_CONF_DIR`, read by every spark-submit the tests start, also through
    Airflow and `make demo`) with `SPARK_DEFAULTS`; a folder the environment names already is kept."""
    if os.environ.get("SPARK_CONF_DIR"):
        yield os.environ["SPARK_CONF_DIR"]
        return
    folder = tmp_path_factory.mktemp("spark-conf")
    (folder / "spark-defaults.conf").write_text(SPARK_DEFAULTS)
    os.environ["SPARK_CONF_DIR"] = str(folder)
    yield str(folder)
    os.environ.pop("SPARK_CONF_DIR", None)


@pytest.fixture(autouse=True, scope="session")
def lookup_files_dir(tmp_path_factory: pytest.TempPathFactory):
    """Lookups' local copies of data files (format/lookup_files.py) go to the run's own directory, also in the
    Spark and Airflow processes tests start."""
    key = LOOKUP_DIR_ENV
    before = os.environ.get(key)
    os.environ[key] = str(tmp_path_factory.mktemp("lookup-files"))
    yield os.environ[key]
    if before is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = before
