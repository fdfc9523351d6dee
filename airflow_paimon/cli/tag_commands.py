"""``tag create | delete | rename``: named tags by hand (periodic tags are the Airflow operators' job)."""

from __future__ import annotations

import argparse

from airflow_paimon.cli.common import (
    Parser,
    Subparsers,
    add_command,
    add_table_arguments,
    open_table,
    parse_time,
    print_json,
    print_report,
    utc,
)


def cmd_tag_create(args: argparse.Namespace) -> int:
    from airflow_paimon.format import periodic_tags
    from airflow_paimon.format.values import duration

    table = open_table(args)
    as_of = parse_time(args.as_of, "--as-of") if args.as_of is not None else None
    retain = duration(args.retain, "--retain", positive=True) if args.retain is not None else None
    applied = periodic_tags.apply(table, args.name, snapshot_id=args.snapshot, as_of=as_of, time_retained=retain,
                                  if_exists="replace" if args.replace else "verify")
    tag = applied.tag
    if args.json:
        print_json({"tag_name": tag.name, "snapshot_id": tag.snapshot.id, "created": applied.rewritten,
                    "commit_time": utc(tag.snapshot.time_millis),
                    "time_retained": tag.time_retained.total_seconds() if tag.time_retained else None})
    elif not applied.rewritten:
        print(f"tag {tag.name!r} already exists on snapshot {tag.snapshot.id}; nothing changed")
    else:
        verb = "replaced" if applied.previous is not None else "created"
        retained = f", retained {args.retain or tag.time_retained}" if tag.time_retained else ""
        print(f"{verb} tag {tag.name!r} on snapshot {tag.snapshot.id} (committed {utc(tag.snapshot.time_millis)})"
              f"{retained}")
    return 0


def cmd_tag_delete(args: argparse.Namespace) -> int:
    table = open_table(args)
    result = table.maintenance.delete_tag(args.name, dry_run=args.dry_run)
    print_report(args, result, args.dry_run)
    return 0


def cmd_tag_rename(args: argparse.Namespace) -> int:
    table = open_table(args)
    tag = table.tags.rename(args.old, args.new)
    if args.json:
        print_json({"tag_name": tag.name, "previous_name": args.old, "snapshot_id": tag.snapshot.id})
    else:
        print(f"renamed tag {args.old!r} to {tag.name!r} (snapshot {tag.snapshot.id})")
    return 0


def register(subs: Subparsers) -> None:
    tag = subs.add_parser("tag", help="create, delete or rename a tag", description="create, delete or rename a tag",
                          epilog="example:\n  airflow-paimon tag create sales.orders 2026-11-20 --retain 30d",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    tag_subs = tag.add_subparsers(dest="tag_command", metavar="ACTION", parser_class=Parser)
    tag_subs.required = True
    p = add_command(tag_subs, "create", "tag the latest snapshot (or snapshot N, or the latest at or before a time)",
                    "airflow-paimon tag create sales.orders 2026-11-20 --as-of '2026-11-21 02:00' --retain 7d",
                    cmd_tag_create)
    add_table_arguments(p)
    p.add_argument("name", help="the tag name (not purely numeric; no '/', '\\' or '..')")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--snapshot", metavar="N", type=int, help="tag this snapshot")
    g.add_argument("--as-of", metavar="TIME", help="tag the latest snapshot committed at or before TIME")
    p.add_argument("--retain", metavar="DURATION",
                   help="keep the tag this long (e.g. 7d, '12 h'); default: tag.default-time-retained")
    p.add_argument("--replace", action="store_true", help="move an existing tag to the new snapshot")

    p = add_command(tag_subs, "delete", "delete a tag and the files only it uses",
                    "airflow-paimon tag delete sales.orders 2026-11-20", cmd_tag_delete)
    add_table_arguments(p)
    p.add_argument("name", help="the tag to delete")
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")

    p = add_command(tag_subs, "rename", "rename a tag",
                    "airflow-paimon tag rename sales.orders before-fix pre-2026-11-20", cmd_tag_rename)
    add_table_arguments(p)
    p.add_argument("old", help="the tag's current name")
    p.add_argument("new", help="its new name")
