"""Change-feed commands: `changes`, `consumers`, `consumer reset|delete`.

    airflow-paimon changes sales.orders --from 2026-11-19 --to 2026-11-20 --format csv
    airflow-paimon changes sales.orders --consumer billing --advance --format parquet --output out.parquet
    airflow-paimon consumers sales.orders

`--from`/`--to` are snapshot ids, tag names or times, bounded as Paimon bounds them: the start is exclusive,
the end inclusive. With `--consumer` the range starts at the consumer's position; `--advance` moves the consumer
past the range only after every row was written out, so a failed run reads the same rows again.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from airflow_paimon.cli.common import Parser, Subparsers, add_command, add_table_arguments, open_table, render_table
from airflow_paimon.format.changes.bounds import resolve_bound
from airflow_paimon.format.errors import InvalidOptionError


def _bound(text: str | None) -> Any:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() else text


def _write(reader: Any, fmt: str, output: str | None, render: Callable[..., str]) -> int:
    """Rows to the output; csv and parquet are written batch by batch, so a long range is never held whole."""
    import pyarrow as pa

    count = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq
        if not output:
            raise InvalidOptionError("--format parquet needs --output FILE")
        with pq.ParquetWriter(output, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
                count += batch.num_rows
        return count
    if fmt == "csv":
        import pyarrow.csv as pcsv
        out = open(output, "w", encoding="utf-8") if output else sys.stdout
        try:
            for i, batch in enumerate(reader):
                sink = pa.BufferOutputStream()
                pcsv.write_csv(pa.Table.from_batches([batch], reader.schema), sink,
                               pcsv.WriteOptions(include_header=i == 0))
                out.write(sink.getvalue().to_pybytes().decode("utf-8"))
                count += batch.num_rows
            if count == 0:  # the header alone
                header = pa.BufferOutputStream()
                pcsv.write_csv(reader.schema.empty_table(), header)
                out.write(header.getvalue().to_pybytes().decode("utf-8"))
        finally:
            if output:
                out.close()
        return count
    data = reader.read_all()
    rows = data.to_pylist()
    if fmt == "json":
        text = json.dumps(rows, indent=2, default=str) + "\n"
    else:
        text = render(data.column_names, [[r[c] for c in data.column_names] for r in rows]) + "\n" if rows \
            else "(no changes)\n"
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return len(rows)


def cmd_changes(args: argparse.Namespace) -> int:
    table = open_table(args)
    if args.consumer is not None and args.start is not None:
        raise InvalidOptionError("give --from or --consumer, not both: a consumer's position is its start")
    if args.consumer is None and args.start is None:
        raise InvalidOptionError("give --from (the start of the range, exclusive) or --consumer ID")
    if args.advance and args.consumer is None:
        raise InvalidOptionError("--advance moves a consumer: give --consumer ID")
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    end = _bound(args.end)
    if end is None:
        latest = table.latest_snapshot()
        end = latest.id if latest is not None else 0  # fixed now: a commit during the read is the next range's
    elif args.advance:
        end = resolve_bound(table, end, "--to").id
    reader = table.changes(_bound(args.start), end, columns=columns, mode=args.mode, consumer_id=args.consumer)
    count = _write(reader, args.format, args.output, render_table)
    if args.output:
        print(f"wrote {count} change row(s) to {args.output}", file=sys.stderr)
    if args.advance:
        nxt = table.consumers.advance(args.consumer, int(end) + 1)
        print(f"consumer {args.consumer!r} now at snapshot {nxt}", file=sys.stderr)
    return 0


def cmd_consumers(args: argparse.Namespace) -> int:
    table = open_table(args)
    rows = [{"consumer_id": k, "next_snapshot_id": v} for k, v in sorted(table.consumers.positions().items())]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif rows:
        print(render_table(["consumer_id", "next_snapshot_id"],
                           [[r["consumer_id"], r["next_snapshot_id"]] for r in rows]))
    else:
        print("(no consumers)")
    return 0


def cmd_consumer_reset(args: argparse.Namespace) -> int:
    table = open_table(args)
    nxt = table.consumers.reset(args.consumer_id, args.to)
    print(f"consumer {args.consumer_id!r} reset to snapshot {nxt}")
    return 0


def cmd_consumer_delete(args: argparse.Namespace) -> int:
    table = open_table(args)
    table.consumers.delete(args.consumer_id)
    print(f"consumer {args.consumer_id!r} deleted")
    return 0


def register(subs: Subparsers) -> None:
    p = add_command(subs, "changes", "the rows that changed between two snapshots, tags or times (start exclusive)",
            "airflow-paimon changes sales.orders --from 2026-11-19 --to 2026-11-20",
            cmd_changes)
    add_table_arguments(p, json_flag=False)
    p.add_argument("--from", dest="start", metavar="TAG|SNAPSHOT|TIME",
                   help="the start of the range, exclusive (Paimon's bound, not Delta's)")
    p.add_argument("--to", dest="end", metavar="TAG|SNAPSHOT|TIME", help="the end, inclusive (default: latest)")
    p.add_argument("--mode", choices=["auto", "changelog", "delta", "diff"], default="auto",
                   help="Paimon's incremental-between-scan-mode (default: auto)")
    p.add_argument("--consumer", metavar="ID", help="start at this consumer's position")
    p.add_argument("--advance", action="store_true",
                   help="with --consumer: move it past the range once every row was written")
    p.add_argument("--columns", metavar="A,B", help="only these columns (the change columns are always there)")
    p.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table",
                   help="output format (default: table)")
    p.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")

    p = add_command(subs, "consumers", "list the table's consumers and their next snapshot",
            "airflow-paimon consumers sales.orders", cmd_consumers)
    add_table_arguments(p)

    consumer = subs.add_parser("consumer", help="reset or delete a consumer", description="reset or delete a consumer",
                               epilog="example:\n  airflow-paimon consumer reset sales.orders billing --to 42",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = consumer.add_subparsers(dest="consumer_command", metavar="ACTION", parser_class=Parser)
    actions.required = True
    p = add_command(actions, "reset", "move a consumer to a snapshot (its next one to read)",
            "airflow-paimon consumer reset sales.orders billing --to 42",
            cmd_consumer_reset)
    add_table_arguments(p, json_flag=False)
    p.add_argument("consumer_id", metavar="ID", help="the consumer")
    p.add_argument("--to", type=int, required=True, metavar="SNAPSHOT", help="the next snapshot it reads")
    p = add_command(actions, "delete", "delete a consumer (snapshot expiry no longer waits for it)",
            "airflow-paimon consumer delete sales.orders billing", cmd_consumer_delete)
    add_table_arguments(p, json_flag=False)
    p.add_argument("consumer_id", metavar="ID", help="the consumer")
