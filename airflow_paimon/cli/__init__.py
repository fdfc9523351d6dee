"""`airflow-paimon`: look at and look after Paimon tables from a shell, without Airflow.

    airflow-paimon snapshots sales.orders --warehouse /data/warehouse
    airflow-paimon tag create sales.orders 2026-11-20 --as-of "2026-11-21 02:00"
    airflow-paimon expire-snapshots sales.orders --retain-min 20 --dry-run

Every command takes the table (`database.table`) first and `--warehouse URI` (default: $PAIMON_WAREHOUSE),
or `--conn-id ID` to use an Airflow connection of type `paimon` (its warehouse, keys and filesystem options,
read through PaimonHook; needs Airflow installed). `--option KEY=VALUE` (repeatable) adds or overrides a
filesystem option such as `s3.endpoint`; option values are never printed (they may be secrets). Listings print
an aligned table, or JSON with `--json`. Values are read as everywhere in the package
(`airflow_paimon.format.values`): times are ISO 8601 (`2026-11-20`, `2026-11-20 02:00:00`,
`2026-11-20T02:00:00+01:00`), without an offset they are UTC, and times printed are UTC too; durations and ages
are Paimon's (`7d`, `12 h`, `30 min`). Errors print one line on stderr and exit with status 1 (2 for a bad
command line).

Commands come in groups, one module each, with a ``register(subparsers)`` function that adds its commands;
a new group is a new module and one entry in :data:`COMMAND_GROUPS` (whose order is the order of ``--help``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from airflow_paimon.cli import changes, listings, merge_command, read, tag_commands, upkeep
from airflow_paimon.cli.common import PROG, CliError, Parser, Subparsers, parse_time, redact, render_table

__all__ = ["COMMAND_GROUPS", "CliError", "build_parser", "main", "parse_time", "render_table"]

COMMAND_GROUPS: tuple[Callable[[Subparsers], None], ...] = (
    listings.register,
    tag_commands.register,
    upkeep.register,
    read.register,
    changes.register,
    merge_command.register,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="Look at and look after Apache Paimon tables (no Airflow needed).",
                    epilog="example:\n  airflow-paimon snapshots sales.orders --warehouse /data/warehouse\n\n"
                           "Times are ISO 8601; without an offset they are UTC.",
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    subs.required = True
    for register in COMMAND_GROUPS:
        register(subs)
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
