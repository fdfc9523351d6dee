"""The driver of the executors' racing-commit test, run by ``spark-submit`` against the cluster's master, apart
from the pytest process (whose shared local session a second session in the same process would take over).

Usage: ``spark-submit racing_commits.py <job file>``, a JSON file naming the ``warehouse``, its ``options`` (kept
off the command line, where ``ps`` would show the keys), ``racers``, ``commits`` and the ``result`` file.
Each of `racers` tasks (a barrier stage: they start together) makes `commits` single-row commits to
``db.t``, retrying a ``CommitConflictError`` (raised once the library's own retries give up) until the commit
lands; the result file lists, per landed commit, the key, the snapshot id the task was told it got, the worker
folder its executor ran in and how many such errors it retried.
"""

from __future__ import annotations

import json
import sys


def racer(warehouse: str, options: dict[str, str], commits: int):
    def commit_rows(_rows):
        import os

        import pyarrow as pa
        from pyspark import BarrierTaskContext

        from airflow_paimon.format import Catalog, CommitConflictError

        context = BarrierTaskContext.get()
        index = context.partitionId()
        table = Catalog(warehouse, options).get_table("db.t")
        context.barrier()  # the racers start together, or the first could finish before the second starts
        for i in range(commits):
            key, conflicts = index * 1000 + i, 0
            while True:
                try:
                    snapshot = table.write(pa.table({"id": [key], "racer": [index]}), commit_user=f"racer-{index}")
                    break
                except CommitConflictError:
                    conflicts += 1
            yield {
                "key": key,
                "snapshot": snapshot.id,
                "worker": os.getcwd().rsplit("/work/", 1)[0],
                "conflicts": conflicts,
            }

    return commit_rows


def main(job_file: str) -> None:
    from pyspark.sql import SparkSession

    with open(job_file) as f:
        job = json.load(f)
    spark = SparkSession.builder.appName("racing-commits").getOrCreate()
    try:
        landed = (
            spark.sparkContext.parallelize(range(job["racers"]), job["racers"])
            .barrier()
            .mapPartitions(racer(job["warehouse"], job["options"], job["commits"]))
            .collect()
        )
    finally:
        spark.stop()
    with open(job["result"], "w") as out:
        json.dump(landed, out)


if __name__ == "__main__":
    main(sys.argv[1])
