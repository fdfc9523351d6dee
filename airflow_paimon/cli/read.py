"""``read``: a table's rows (latest, at a tag, a snapshot or a time) as a table, CSV, JSON or Parquet."""

from __future__ import annotations

import argparse
import json
import sys

from airflow_paimon.cli.common import (
    CliError,
    Subparsers,
    add_command,
    add_table_arguments,
    json_default,
    open_table,
    parse_time,
    render_table,
)


def cmd_read(args: argparse.Namespace) -> int:
    import pyarrow as pa

    table = open_table(args)
    given = [x for x in (args.tag, args.snapshot, args.as_of) if x is not None]
    if len(given) > 1:
        raise CliError("give at most one of --tag, --snapshot and --as-of")
    if args.closest_tag and args.as_of is None:
        raise CliError("--closest-tag applies to --as-of only")
    as_of = parse_time(args.as_of, "--as-of") if args.as_of is not None else None
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    if as_of is not None:
        travel = table.time_travel(as_of, closest_tag=args.closest_tag)
        print(f"reading {travel.describe()}", file=sys.stderr)
        data = table.read(snapshot_id=travel.snapshot.id, columns=columns) if travel.tag is None else \
            table.read(tag=travel.tag, columns=columns)
    else:
        data = table.read(snapshot_id=args.snapshot, tag=args.tag, columns=columns)
    if args.limit is not None:
        if args.limit < 0:
            raise CliError("--limit must not be negative")
        data = data.slice(0, args.limit)
    fmt = args.format
    if fmt == "parquet":
        import pyarrow.parquet as pq
        if not args.output:
            raise CliError("--format parquet needs --output FILE")
        pq.write_table(data, args.output)
        print(f"wrote {data.num_rows} row(s) to {args.output}", file=sys.stderr)
        return 0
    if fmt == "csv":
        import pyarrow.csv as pcsv
        if args.output:
            pcsv.write_csv(data, args.output)
        else:
            sink = pa.BufferOutputStream()
            pcsv.write_csv(data, sink)
            sys.stdout.write(sink.getvalue().to_pybytes().decode("utf-8"))
        return 0
    if fmt == "json":
        text = json.dumps(data.to_pylist(), indent=2, default=json_default) + "\n"
    else:
        rows = data.to_pylist()
        text = render_table(data.column_names, [[r[c] for c in data.column_names] for r in rows]) + "\n" \
            if rows else "(no rows)\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def register(subs: Subparsers) -> None:
    p = add_command(subs, "read", "read rows of the latest snapshot (or of a tag, snapshot or time)",
                    "airflow-paimon read sales.orders --tag 2026-11-20 --limit 20 --format csv", cmd_read)
    add_table_arguments(p, json_flag=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tag", metavar="NAME", help="read this tag")
    g.add_argument("--snapshot", metavar="N", type=int, help="read this snapshot")
    g.add_argument("--as-of", metavar="TIME", help="read the table as it was at TIME")
    p.add_argument("--closest-tag", action="store_true",
                   help="with --as-of: when the snapshot current at TIME expired, read the closest older tag "
                        "instead of failing")
    p.add_argument("--columns", metavar="A,B", help="only these columns")
    p.add_argument("--limit", metavar="N", type=int, help="at most N rows")
    p.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table",
                   help="output format (default: table)")
    p.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
