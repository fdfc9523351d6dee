"""Upkeep commands: ``expire-snapshots``, ``expire-tags``, ``rollback`` and ``remove-orphan-files`` (each with
``--dry-run``), by the format library's rules."""

from __future__ import annotations

import argparse

from airflow_paimon.cli.common import (
    CliError,
    Subparsers,
    add_command,
    add_table_arguments,
    open_table,
    print_json,
    print_report,
    progress_line,
    utc,
)


def cmd_expire_snapshots(args: argparse.Namespace) -> int:
    from airflow_paimon.format.upkeep.expire_policy import ExpirePolicy
    from airflow_paimon.format.values import age_or_instant

    table = open_table(args)
    older = age_or_instant(args.older_than, "--older-than") if args.older_than is not None else None
    policy = ExpirePolicy.from_options(table.options(), retain_min=args.retain_min, retain_max=args.retain_max,
                                       older_than=older, max_deletes=args.max_deletes)
    with progress_line() as progress:
        result = table.maintenance.expire_snapshots(policy=policy, dry_run=args.dry_run, progress=progress)
    print_report(args, result, args.dry_run)
    return 0


def cmd_expire_tags(args: argparse.Namespace) -> int:
    from airflow_paimon.format.upkeep.tag_cleanup import tags_to_expire

    table = open_table(args)
    reasons = {t.name: why for t, why in tags_to_expire(table)}
    with progress_line() as progress:
        result = table.maintenance.expire_tags(dry_run=args.dry_run, progress=progress)
    if args.json:
        doc = result.to_dict()
        doc["reasons"] = {n: reasons.get(n) for n in result.tags}
        print_json(doc)
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
    table = open_table(args)
    from airflow_paimon.format.values import instant

    to_time = instant(args.time, "--time") if args.time is not None else None
    with progress_line() as progress:
        result = table.maintenance.rollback(to_tag=args.tag, to_snapshot=args.snapshot, to_time=to_time,
                                            dry_run=args.dry_run, progress=progress)
    print_report(args, result, args.dry_run)
    return 0


def cmd_remove_orphans(args: argparse.Namespace) -> int:
    from airflow_paimon.format.upkeep.results import human_bytes
    from airflow_paimon.format.values import age_or_instant

    table = open_table(args)
    older = age_or_instant(args.older_than, "--older-than") if args.older_than is not None else None
    with progress_line() as progress:
        result = table.maintenance.remove_orphan_files(older_than=older, dry_run=args.dry_run, progress=progress)
    if args.json:
        print_json(result.to_dict())
        return 0
    print(result.summary())
    for f in result.files:
        print(f"  {f.path}  ({human_bytes(f.size)}, modified {utc(f.mtime_ms)})")
    return 0


def register(subs: Subparsers) -> None:
    p = add_command(subs, "expire-snapshots",
                    "expire old snapshots (table options snapshot.num-retained.min/max, snapshot.time-retained, "
                    "snapshot.expire.limit; arguments override them)",
                    "airflow-paimon expire-snapshots sales.orders --retain-min 20 --older-than 2026-11-01 --dry-run",
                    cmd_expire_snapshots)
    add_table_arguments(p)
    p.add_argument("--retain-min", metavar="N", type=int, help="always keep at least the N newest snapshots")
    p.add_argument("--retain-max", metavar="N", type=int, help="keep at most N snapshots")
    p.add_argument("--older-than", metavar="TIME|AGE",
                   help="expire snapshots superseded before TIME, or more than AGE (e.g. 7d) ago")
    p.add_argument("--max-deletes", metavar="N", type=int, help="expire at most N snapshots in this run")
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = add_command(subs, "expire-tags",
                    "delete tags whose retention ran out and periodic tags beyond tag.num-retained-max",
                    "airflow-paimon expire-tags sales.orders --dry-run", cmd_expire_tags)
    add_table_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = add_command(subs, "rollback",
                    "roll the table back to a tag, a snapshot or a point in time (give exactly one)",
                    "airflow-paimon rollback sales.orders --tag 2026-11-20", cmd_rollback)
    add_table_arguments(p)
    p.add_argument("--tag", metavar="NAME", help="the tag to roll back to (a missing tag is an error)")
    p.add_argument("--snapshot", metavar="N", type=int, help="the snapshot id to roll back to")
    p.add_argument("--time", metavar="TIME",
                   help="roll back to the snapshot current at TIME (refused if that snapshot expired and no tag "
                        "provably holds it)")
    p.add_argument("--to", help=argparse.SUPPRESS)
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = add_command(subs, "remove-orphan-files",
                    "delete files nothing references that are older than a safety age (default: 1 day)",
                    "airflow-paimon remove-orphan-files sales.orders --older-than 2026-11-19 --dry-run",
                    cmd_remove_orphans)
    add_table_arguments(p)
    p.add_argument("--older-than", metavar="TIME|AGE",
                   help="only files last modified before TIME, or more than AGE (e.g. 3d) ago (default: 1 day)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
