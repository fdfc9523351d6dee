"""`airflow-paimon`: look at and look after Paimon tables from a shell, without Airflow.

    airflow-paimon snapshots sales.orders --warehouse /data/warehouse
    airflow-paimon tag create sales.orders 2026-11-20 --as-of "2026-11-21 02:00"
    airflow-paimon expire-snapshots sales.orders --retain-min 20 --dry-run

Every command takes the table (`database.table`) first and `--warehouse URI` (default: $PAIMON_WAREHOUSE),
or `--conn-id ID` to use an Airflow connection of type `paimon` (its warehouse, keys and filesystem options,
read through PaimonHook; needs Airflow installed). `--option KEY=VALUE` (repeatable) adds or overrides a
filesystem option such as `s3.endpoint`; option values are never printed (they may be secrets). Listings print
an aligned table, or JSON with `--json`. Times given on the command line are ISO 8601
(`2026-11-20`, `2026-11-20 02:00:00`, `2026-11-20T02:00:00+01:00`); without an offset they are UTC, and times
printed are UTC too. Errors print one line on stderr and exit with status 1 (2 for a bad command line).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
from typing import Any, Iterator, Sequence

ENV_WAREHOUSE = "PAIMON_WAREHOUSE"
PROG = "airflow-paimon"


class CliError(Exception):
    """A problem with what was asked; printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr (and exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


# ---------------------------------------------------------------------------------------------------------
# Parsing values
# ---------------------------------------------------------------------------------------------------------

def parse_time(text: str, flag: str | None = None) -> int:
    """ISO 8601 date or date-time, with or without an offset (none: UTC) -> epoch milliseconds."""
    raw = str(text).strip()
    value = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    try:
        if len(value) == 10 and value[4] == "-" and value[7] == "-":
            parsed = dt.datetime.combine(dt.date.fromisoformat(value), dt.time())
        else:
            parsed = dt.datetime.fromisoformat(value)
    except (ValueError, IndexError):
        where = f"{flag}: " if flag else ""
        raise CliError(f"{where}{raw!r} is not an ISO 8601 time (examples: 2026-11-20, '2026-11-20 02:00:00', "
                       "2026-11-20T02:00:00+01:00)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return int(parsed.timestamp() * 1000)


def _utc(millis: int | None) -> str | None:
    if millis is None:
        return None
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _local_naive_to_utc(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    return _utc(int(value.astimezone().timestamp() * 1000))


# ---------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------

def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned plain-text table: numbers right-aligned, empty cells for missing values."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    numeric = [all(_is_number(r[i]) for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
               for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(values):
            out.append(v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    parts = [line(list(columns)), line(["-" * w for w in widths])]
    parts += [line(r) for r in cells]
    return "\n".join(parts)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, default=_json_default))


def _listing(args: argparse.Namespace, columns: list[str], rows: list[dict[str, Any]],
             empty: str) -> None:
    if args.json:
        _print_json(rows)
        return
    if not rows:
        print(empty)
        return
    print(render_table(columns, [[r.get(c) for c in columns] for r in rows]))


# ---------------------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------------------

def option_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--option``; the error never repeats the text, which may hold a secret."""
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError("expected KEY=VALUE (for example s3.endpoint=http://minio:9000); "
                                         "the value given has no key before '=' (not repeated: it may be a secret)")
    return key.strip(), value


def _warehouse_and_options(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """The warehouse and filesystem options: the Airflow connection's with ``--conn-id``, then ``--warehouse``
    and ``--option`` over them."""
    options = dict(args.option or [])
    warehouse = args.warehouse
    if args.conn_id:
        try:
            from airflow_paimon.hooks.paimon import PaimonConnectionNotFound, PaimonHook
        except ImportError:
            raise CliError("--conn-id reads an Airflow connection and needs Apache Airflow installed; without it "
                           "pass --warehouse URI and --option KEY=VALUE") from None
        hook = PaimonHook(paimon_conn_id=args.conn_id, warehouse=warehouse, options=options)
        try:
            return hook.warehouse, dict(hook.options)
        except PaimonConnectionNotFound:
            variable = "AIRFLOW_CONN_" + args.conn_id.upper().replace("-", "_")
            raise CliError(f"the Airflow connection {args.conn_id!r} is not defined: create it (type paimon) with "
                           f"'airflow connections add' or the environment variable {variable}") from None
    warehouse = warehouse or os.environ.get(ENV_WAREHOUSE)
    if not warehouse:
        raise CliError(f"no warehouse: pass --warehouse URI, --conn-id ID or set {ENV_WAREHOUSE}")
    return warehouse, options


def _table(args: argparse.Namespace):
    from airflow_paimon.format import Catalog

    args.secrets = [v for _, v in (args.option or []) if v]
    warehouse, options = _warehouse_and_options(args)
    args.secrets = sorted(set(args.secrets) | {v for v in options.values() if v}, key=len, reverse=True)
    return Catalog(warehouse, options=options).get_table(args.table)


def redact(message: str, secrets: Sequence[str]) -> str:
    """``message`` with every option value replaced by ``***`` (an error text may quote one)."""
    for secret in secrets:
        if len(secret) >= 3:
            message = message.replace(secret, "***")
    return message


@contextlib.contextmanager
def _progress() -> Iterator[Any]:
    """A progress line on stderr while the block runs (None when stderr is not a terminal), cleared after."""
    from airflow_paimon.format.upkeep.progress import tty_progress

    progress = tty_progress(sys.stderr)
    try:
        yield progress
    finally:
        if progress is not None:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def cmd_snapshots(args: argparse.Namespace) -> int:
    table = _table(args)
    rows = []
    for s in table.snapshots():
        rows.append({
            "snapshot_id": s.id, "schema_id": s.schema_id, "commit_kind": s.commit_kind,
            "commit_time": _utc(s.time_millis), "total_records": s.total_record_count,
            "delta_records": s.delta_record_count, "commit_user": s.commit_user,
            "commit_identifier": s.commit_identifier, "base_manifest_list": s.base_manifest_list,
            "delta_manifest_list": s.delta_manifest_list, "changelog_manifest_list": s.changelog_manifest_list,
            "watermark": s.watermark,
        })
    _listing(args, ["snapshot_id", "schema_id", "commit_kind", "commit_time", "total_records", "delta_records",
                    "commit_user"], rows, f"{table.identifier} has no snapshots")
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    table = _table(args)
    rows = []
    from airflow_paimon.format.tag_file import java_duration_string
    for t in sorted(table.tags.list(), key=lambda t: (t.snapshot.id, t.name)):
        s = t.snapshot
        rows.append({
            "tag_name": t.name, "snapshot_id": s.id, "schema_id": s.schema_id,
            "commit_time": _utc(s.time_millis), "record_count": s.total_record_count,
            "create_time": _local_naive_to_utc(t.create_time),
            "time_retained": java_duration_string(t.time_retained) if t.time_retained is not None else None,
            "expires": _local_naive_to_utc(t.expires_at),
        })
    _listing(args, ["tag_name", "snapshot_id", "commit_time", "record_count", "time_retained", "expires"], rows,
             f"{table.identifier} has no tags")
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    from airflow_paimon.format.upkeep.results import human_bytes

    table = _table(args)
    data = table.inspect.files(snapshot_id=args.snapshot, tag=args.tag)
    rows = data.to_pylist()
    if args.json:
        _print_json(rows)
        return 0
    prefix = table.path + "/"
    out = []
    for r in rows:
        path = r["file_path"]
        out.append({"partition": r["partition"], "bucket": r["bucket"], "level": r["level"],
                    "records": r["record_count"], "size": human_bytes(r["file_size_in_bytes"]),
                    "file": path[len(prefix):] if path.startswith(prefix) else path})
    _listing(args, ["partition", "bucket", "level", "records", "size", "file"], out, "no data files")
    return 0


def cmd_tag_create(args: argparse.Namespace) -> int:
    table = _table(args)
    as_of = parse_time(args.as_of, "--as-of") if args.as_of is not None else None
    existed = table.tags.exists(args.name) if _safe_name(args.name) else False
    before = table.tags.get(args.name) if existed else None
    tag = table.tags.create(args.name, snapshot_id=args.snapshot, as_of=as_of, time_retained=args.retain,
                            replace=args.replace)
    unchanged = before is not None and before.snapshot.id == tag.snapshot.id and before.create_time == tag.create_time
    if args.json:
        _print_json({"tag_name": tag.name, "snapshot_id": tag.snapshot.id, "created": not unchanged,
                     "commit_time": _utc(tag.snapshot.time_millis),
                     "time_retained": tag.time_retained.total_seconds() if tag.time_retained else None})
    elif unchanged:
        print(f"tag {tag.name!r} already exists on snapshot {tag.snapshot.id}; nothing changed")
    else:
        verb = "replaced" if before is not None else "created"
        retained = f", retained {args.retain or tag.time_retained}" if tag.time_retained else ""
        print(f"{verb} tag {tag.name!r} on snapshot {tag.snapshot.id} (committed {_utc(tag.snapshot.time_millis)})"
              f"{retained}")
    return 0


def _safe_name(name: str) -> bool:
    return bool(name.strip()) and "/" not in name and "\\" not in name and ".." not in name


def _report(args: argparse.Namespace, result: Any, list_files: bool) -> None:
    if args.json:
        _print_json(result.to_dict())
        return
    print(result.summary())
    if list_files:
        for p in getattr(result, "files", []):
            print(f"  {p.path if hasattr(p, 'path') else p}")


def cmd_tag_delete(args: argparse.Namespace) -> int:
    table = _table(args)
    result = table.maintenance.delete_tag(args.name, dry_run=args.dry_run)
    _report(args, result, args.dry_run)
    return 0


def cmd_tag_rename(args: argparse.Namespace) -> int:
    table = _table(args)
    tag = table.tags.rename(args.old, args.new)
    if args.json:
        _print_json({"tag_name": tag.name, "previous_name": args.old, "snapshot_id": tag.snapshot.id})
    else:
        print(f"renamed tag {args.old!r} to {tag.name!r} (snapshot {tag.snapshot.id})")
    return 0


def cmd_expire_snapshots(args: argparse.Namespace) -> int:
    table = _table(args)
    older = parse_time(args.older_than, "--older-than") if args.older_than is not None else None
    with _progress() as progress:
        result = table.maintenance.expire_snapshots(
            retain_min=args.retain_min, retain_max=args.retain_max, older_than=older, max_deletes=args.max_deletes,
            dry_run=args.dry_run, progress=progress)
    _report(args, result, args.dry_run)
    return 0


def cmd_expire_tags(args: argparse.Namespace) -> int:
    table = _table(args)
    from airflow_paimon.format.upkeep.tag_cleanup import tags_to_expire
    reasons = {t.name: why for t, why in tags_to_expire(table)}
    with _progress() as progress:
        result = table.maintenance.expire_tags(dry_run=args.dry_run, progress=progress)
    if args.json:
        doc = result.to_dict()
        doc["reasons"] = {n: reasons.get(n) for n in result.tags}
        _print_json(doc)
        return 0
    print(result.summary())
    for name in result.tags:
        print(f"  {name}: {reasons.get(name, 'expired')}")
    if args.dry_run:
        for p in result.files:
            print(f"  {p}")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    if args.to is not None:
        value = args.to.strip()
        raise CliError(f"--to is gone because a tag name such as 2026-11-20 also reads as a date: say which you "
                       f"mean, --tag {value} or --time {value} (or --snapshot N)")
    given = [f for f, v in (("--tag", args.tag), ("--snapshot", args.snapshot), ("--time", args.time))
             if v is not None]
    if len(given) != 1:
        raise CliError("give exactly one of --tag NAME, --snapshot N and --time TIME")
    table = _table(args)
    to_time = None
    if args.time is not None:
        to_time = dt.datetime.fromtimestamp(parse_time(args.time, "--time") / 1000, dt.timezone.utc)
    with _progress() as progress:
        result = table.maintenance.rollback(to_tag=args.tag, to_snapshot=args.snapshot, to_time=to_time,
                                            dry_run=args.dry_run, progress=progress)
    _report(args, result, args.dry_run)
    return 0


def cmd_remove_orphans(args: argparse.Namespace) -> int:
    from airflow_paimon.format.upkeep.results import human_bytes

    table = _table(args)
    older = parse_time(args.older_than, "--older-than") if args.older_than is not None else None
    with _progress() as progress:
        result = table.maintenance.remove_orphan_files(older_than=older, dry_run=args.dry_run, progress=progress)
    if args.json:
        _print_json(result.to_dict())
        return 0
    print(result.summary())
    for f in result.files:
        print(f"  {f.path}  ({human_bytes(f.size)}, modified {_utc(f.mtime_ms)})")
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    import pyarrow as pa
    table = _table(args)
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
        text = json.dumps(data.to_pylist(), indent=2, default=_json_default) + "\n"
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


# ---------------------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    p.add_argument("table", help="the table, as database.table")
    p.add_argument("--warehouse", metavar="URI", default=None,
                   help=f"warehouse path or URI (default: ${ENV_WAREHOUSE}, or the connection's)")
    p.add_argument("--conn-id", metavar="ID", default=None,
                   help="take the warehouse and filesystem options (endpoint, keys) from this Airflow connection "
                        "of type paimon (needs Airflow installed)")
    p.add_argument("--option", metavar="KEY=VALUE", action="append", type=option_pair, default=None,
                   help="a filesystem option, e.g. s3.endpoint=http://minio:9000 (repeatable; overrides the "
                        "connection's; values are never printed)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _sub(subs, name: str, help_text: str, example: str, func) -> argparse.ArgumentParser:
    p = subs.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Look at and look after Apache Paimon tables (no Airflow needed).",
                     epilog="example:\n  airflow-paimon snapshots sales.orders --warehouse /data/warehouse\n\n"
                            "Times are ISO 8601; without an offset they are UTC.",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subs.required = True

    p = _sub(subs, "snapshots", "list the table's snapshots",
             "airflow-paimon snapshots sales.orders --warehouse /data/warehouse", cmd_snapshots)
    _common(p)

    p = _sub(subs, "tags", "list the table's tags", "airflow-paimon tags sales.orders --json", cmd_tags)
    _common(p)

    p = _sub(subs, "files", "list the data files of the latest snapshot (or of a tag or snapshot)",
             "airflow-paimon files sales.orders --tag 2026-11-20", cmd_files)
    _common(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tag", metavar="NAME", help="the files of this tag")
    g.add_argument("--snapshot", metavar="N", type=int, help="the files of this snapshot")

    tag = subs.add_parser("tag", help="create, delete or rename a tag", description="create, delete or rename a tag",
                          epilog="example:\n  airflow-paimon tag create sales.orders 2026-11-20 --retain 30d",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    tag_subs = tag.add_subparsers(dest="tag_command", metavar="ACTION", parser_class=_Parser)
    tag_subs.required = True
    p = _sub(tag_subs, "create", "tag the latest snapshot (or snapshot N, or the latest at or before a time)",
             "airflow-paimon tag create sales.orders 2026-11-20 --as-of '2026-11-21 02:00' --retain 7d",
             cmd_tag_create)
    _common(p)
    p.add_argument("name", help="the tag name (not purely numeric; no '/', '\\' or '..')")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--snapshot", metavar="N", type=int, help="tag this snapshot")
    g.add_argument("--as-of", metavar="TIME", help="tag the latest snapshot committed at or before TIME")
    p.add_argument("--retain", metavar="DURATION",
                   help="keep the tag this long (e.g. 7d, '12 h'); default: tag.default-time-retained")
    p.add_argument("--replace", action="store_true", help="move an existing tag to the new snapshot")

    p = _sub(tag_subs, "delete", "delete a tag and the files only it uses",
             "airflow-paimon tag delete sales.orders 2026-11-20", cmd_tag_delete)
    _common(p)
    p.add_argument("name", help="the tag to delete")
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = _sub(tag_subs, "rename", "rename a tag", "airflow-paimon tag rename sales.orders before-fix pre-2026-11-20",
             cmd_tag_rename)
    _common(p)
    p.add_argument("old", help="the tag's current name")
    p.add_argument("new", help="its new name")

    p = _sub(subs, "expire-snapshots",
             "expire old snapshots (table options snapshot.num-retained.min/max, snapshot.time-retained, "
             "snapshot.expire.limit; arguments override them)",
             "airflow-paimon expire-snapshots sales.orders --retain-min 20 --older-than 2026-11-01 --dry-run",
             cmd_expire_snapshots)
    _common(p)
    p.add_argument("--retain-min", metavar="N", type=int, help="always keep at least the N newest snapshots")
    p.add_argument("--retain-max", metavar="N", type=int, help="keep at most N snapshots")
    p.add_argument("--older-than", metavar="TIME", help="expire snapshots superseded before TIME")
    p.add_argument("--max-deletes", metavar="N", type=int, help="expire at most N snapshots in this run")
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = _sub(subs, "expire-tags",
             "delete tags whose retention ran out and periodic tags beyond tag.num-retained-max",
             "airflow-paimon expire-tags sales.orders --dry-run", cmd_expire_tags)
    _common(p)
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = _sub(subs, "rollback", "roll the table back to a tag, a snapshot or a point in time (give exactly one)",
             "airflow-paimon rollback sales.orders --tag 2026-11-20", cmd_rollback)
    _common(p)
    p.add_argument("--tag", metavar="NAME", help="the tag to roll back to (a missing tag is an error)")
    p.add_argument("--snapshot", metavar="N", type=int, help="the snapshot id to roll back to")
    p.add_argument("--time", metavar="TIME",
                   help="roll back to the snapshot current at TIME (refused if that snapshot expired and no tag "
                        "provably holds it)")
    p.add_argument("--to", help=argparse.SUPPRESS)
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = _sub(subs, "remove-orphan-files",
             "delete files nothing references that are older than a safety age (default: 1 day)",
             "airflow-paimon remove-orphan-files sales.orders --older-than 2026-11-19 --dry-run",
             cmd_remove_orphans)
    _common(p)
    p.add_argument("--older-than", metavar="TIME", help="only files last modified before TIME (default: now - 1 day)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")

    p = _sub(subs, "read", "read rows of the latest snapshot (or of a tag, snapshot or time)",
             "airflow-paimon read sales.orders --tag 2026-11-20 --limit 20 --format csv", cmd_read)
    _common(p, json_flag=False)
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    from airflow_paimon.format.errors import PaimonError
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return 0
    except (CliError, PaimonError, ValueError, OSError) as e:
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        sys.stderr.write(f"{PROG}: error: {redact(message, getattr(args, 'secrets', []))}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as e:  # a bug, not bad input: still one line, the traceback on request
        if os.environ.get("AIRFLOW_PAIMON_DEBUG"):
            raise
        text = redact(str(e).strip().splitlines()[0] if str(e).strip() else "", getattr(args, "secrets", []))
        sys.stderr.write(f"{PROG}: error: unexpected {type(e).__name__}: {text} "
                         "(set AIRFLOW_PAIMON_DEBUG=1 for a traceback)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
