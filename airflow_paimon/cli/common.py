"""What every command of `airflow-paimon` shares: the table arguments, opening the table, parsing times, and
printing listings, reports and errors (one line; option values, which may be secrets, never printed)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

if TYPE_CHECKING:
    from airflow_paimon.format.table import Table

ENV_WAREHOUSE = "PAIMON_WAREHOUSE"
PROG = "airflow-paimon"

Command = Callable[[argparse.Namespace], int]
# What `add_subparsers` returns; argparse gives it no public name.
Subparsers = Any


class CliError(Exception):
    """A problem with what was asked; printed as one line."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr (and exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


# ---------------------------------------------------------------------------------------------------------
# Parsing values
# ---------------------------------------------------------------------------------------------------------

def parse_time(text: str, flag: str = "time") -> int:
    """ISO 8601 date or date-time, with or without an offset (none: UTC) -> epoch milliseconds."""
    from airflow_paimon.format.values import epoch_millis

    return epoch_millis(text, flag)


def utc(millis: int | None) -> str | None:
    """Epoch milliseconds as printed: UTC, milliseconds, a trailing ``Z``."""
    if millis is None:
        return None
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def local_naive_to_utc(value: dt.datetime | None) -> str | None:
    """A tag file's times are local wall-clock times without a zone (as Paimon writes them); printed in UTC."""
    if value is None:
        return None
    return utc(int(value.astimezone().timestamp() * 1000))


def option_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--option``; the error never repeats the text, which may hold a secret."""
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError("expected KEY=VALUE (for example s3.endpoint=http://minio:9000); "
                                         "the value given has no key before '=' (not repeated: it may be a secret)")
    return key.strip(), value


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


def json_default(value: Any) -> Any:
    """JSON for the values Arrow rows and results hold that ``json`` does not know."""
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, default=json_default))


def print_listing(args: argparse.Namespace, columns: list[str], rows: list[dict[str, Any]], empty: str) -> None:
    """Rows as JSON (``--json``) or an aligned table of `columns`; `empty` when there are none."""
    if args.json:
        print_json(rows)
        return
    if not rows:
        print(empty)
        return
    print(render_table(columns, [[r.get(c) for c in columns] for r in rows]))


def print_report(args: argparse.Namespace, result: Any, list_files: bool) -> None:
    """An upkeep result: its dictionary with ``--json``, else its summary (and the files, when asked)."""
    if args.json:
        print_json(result.to_dict())
        return
    print(result.summary())
    if list_files:
        for p in getattr(result, "files", []):
            print(f"  {p.path if hasattr(p, 'path') else p}")


@contextlib.contextmanager
def progress_line() -> Iterator[Any]:
    """A progress line on stderr while the block runs (None when stderr is not a terminal), cleared after."""
    from airflow_paimon.format.upkeep.progress import tty_progress

    progress = tty_progress(sys.stderr)
    try:
        yield progress
    finally:
        if progress is not None:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


# ---------------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------------

def warehouse_and_options(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
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


def open_table(args: argparse.Namespace) -> Table:
    """The table the command names; remembers the option values in ``args.secrets`` so errors can hide them."""
    from airflow_paimon.format import Catalog

    args.secrets = [v for _, v in (args.option or []) if v]
    warehouse, options = warehouse_and_options(args)
    args.secrets = sorted(set(args.secrets) | {v for v in options.values() if v}, key=len, reverse=True)
    return Catalog(warehouse, options=options).get_table(args.table)


def redact(message: str, secrets: Sequence[str]) -> str:
    """``message`` with every option value replaced by ``***`` (an error text may quote one)."""
    for secret in secrets:
        if len(secret) >= 3:
            message = message.replace(secret, "***")
    return message


# ---------------------------------------------------------------------------------------------------------
# Building the parser
# ---------------------------------------------------------------------------------------------------------

def add_table_arguments(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    """The table and where it lives: every command takes them."""
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


def add_command(subs: Subparsers, name: str, help_text: str, example: str,
                func: Command) -> argparse.ArgumentParser:
    """One command: its help, an example in the epilog, and the function that runs it."""
    p: argparse.ArgumentParser = subs.add_parser(
        name, help=help_text, description=help_text, epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=func)
    return p
