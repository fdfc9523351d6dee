"""`merge`: MERGE files into a primary-key table, in this process or on a local Spark.

    airflow-paimon merge sales.orders --source /data/increments/2026-11-20 --clauses clauses.json
    airflow-paimon merge sales.orders --source day.parquet --engine spark --commit-user nightly --commit-id 20261120

`--clauses` is a JSON file (or JSON text) of the clauses as ``airflow_paimon.merge`` describes them (default: the
plain upsert). `--engine auto` (default) merges here when the source is local Parquet, fits `--memory-budget` and
every clause translates exactly, else on Spark (local mode); the result says which engine ran and why. With
`--commit-user` and `--commit-id` a merge whose commit already landed does nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from airflow_paimon.cli.common import (
    CliError,
    Subparsers,
    add_command,
    add_table_arguments,
    open_table,
    print_json,
    warehouse_and_options,
)


def _clauses(text: str | None) -> Any:
    if text is None:
        return None
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"--clauses: neither a JSON file nor JSON text ({e})") from None


def _merge(args: argparse.Namespace) -> int:
    from airflow_paimon.local_merge.choose import merge_here_or_refuse

    table = open_table(args)
    clauses = _clauses(args.clauses)
    on = [c.strip() for c in args.on.split(",")] if args.on else None
    reason = "--engine spark"
    if args.engine != "spark":
        decision = merge_here_or_refuse(table, args.source, source_format=args.format, clauses=clauses, on=on,
                                        commit_user=args.commit_user, commit_identifier=args.commit_id,
                                        memory_budget=args.memory_budget, engine=args.engine)
        if decision.result is not None:
            print_json(decision.result)
            return 0
        reason = decision.reason
    from airflow_paimon.spark.common import spark_session
    from airflow_paimon.spark.merge import run_merge

    warehouse, options = warehouse_and_options(args)
    spec = {"target": table.identifier, "warehouse": warehouse, "options": options, "source": args.source,
            "source_format": args.format, "on": on, "clauses": clauses, "commit_user": args.commit_user,
            "commit_identifier": args.commit_id}
    result = run_merge(lambda: spark_session("airflow-paimon-merge"), spec)
    result["engine_reason"] = reason
    print_json(result)
    return 0


def register(subs: Subparsers) -> None:
    p = add_command(subs, "merge", "MERGE files into a primary-key table (in this process or on Spark)",
                    "airflow-paimon merge sales.orders --source day/ --clauses clauses.json", _merge)
    add_table_arguments(p, json_flag=False)
    p.add_argument("--source", required=True, metavar="FILES", help="a file or folder of the rows to merge")
    p.add_argument("--format", default="parquet", help="the source's format (default parquet; others run on Spark)")
    p.add_argument("--clauses", metavar="JSON", help="a JSON file or JSON text of the clauses (default: upsert)")
    p.add_argument("--on", metavar="COLS", help="comma-separated join columns (default: the primary key)")
    p.add_argument("--engine", choices=["auto", "local", "spark"], default="auto",
                   help="where to run (default auto: here when it fits, else Spark)")
    p.add_argument("--memory-budget", type=int, default=2 << 30, metavar="BYTES",
                   help="bytes the in-process engine may use (default 2 GiB)")
    p.add_argument("--commit-user", metavar="USER", help="with --commit-id: merge exactly once")
    p.add_argument("--commit-id", type=int, metavar="N", help="the commit identifier (an int64)")
