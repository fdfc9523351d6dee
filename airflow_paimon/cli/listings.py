"""Commands that list what a table holds: ``snapshots``, ``tags`` and ``files``."""

from __future__ import annotations

import argparse

from airflow_paimon.cli.common import (
    Subparsers,
    add_command,
    add_table_arguments,
    local_naive_to_utc,
    open_table,
    print_json,
    print_listing,
    utc,
)


def cmd_snapshots(args: argparse.Namespace) -> int:
    table = open_table(args)
    rows = []
    for s in table.snapshots():
        rows.append({
            "snapshot_id": s.id, "schema_id": s.schema_id, "commit_kind": s.commit_kind,
            "commit_time": utc(s.time_millis), "total_records": s.total_record_count,
            "delta_records": s.delta_record_count, "commit_user": s.commit_user,
            "commit_identifier": s.commit_identifier, "base_manifest_list": s.base_manifest_list,
            "delta_manifest_list": s.delta_manifest_list, "changelog_manifest_list": s.changelog_manifest_list,
            "watermark": s.watermark,
        })
    print_listing(args, ["snapshot_id", "schema_id", "commit_kind", "commit_time", "total_records",
                         "delta_records", "commit_user"], rows, f"{table.identifier} has no snapshots")
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    from airflow_paimon.format.tag_file import java_duration_string

    table = open_table(args)
    rows = []
    for t in sorted(table.tags.list(), key=lambda t: (t.snapshot.id, t.name)):
        s = t.snapshot
        rows.append({
            "tag_name": t.name, "snapshot_id": s.id, "schema_id": s.schema_id,
            "commit_time": utc(s.time_millis), "record_count": s.total_record_count,
            "create_time": local_naive_to_utc(t.create_time),
            "time_retained": java_duration_string(t.time_retained) if t.time_retained is not None else None,
            "expires": local_naive_to_utc(t.expires_at),
        })
    print_listing(args, ["tag_name", "snapshot_id", "commit_time", "record_count", "time_retained", "expires"],
                  rows, f"{table.identifier} has no tags")
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    from airflow_paimon.format.upkeep.results import human_bytes

    table = open_table(args)
    data = table.inspect.files(snapshot_id=args.snapshot, tag=args.tag)
    rows = data.to_pylist()
    if args.json:
        print_json(rows)
        return 0
    prefix = table.path + "/"
    out = []
    for r in rows:
        path = r["file_path"]
        out.append({"partition": r["partition"], "bucket": r["bucket"], "level": r["level"],
                    "records": r["record_count"], "size": human_bytes(r["file_size_in_bytes"]),
                    "file": path[len(prefix):] if path.startswith(prefix) else path})
    print_listing(args, ["partition", "bucket", "level", "records", "size", "file"], out, "no data files")
    return 0


def register(subs: Subparsers) -> None:
    p = add_command(subs, "snapshots", "list the table's snapshots",
                    "airflow-paimon snapshots sales.orders --warehouse /data/warehouse", cmd_snapshots)
    add_table_arguments(p)

    p = add_command(subs, "tags", "list the table's tags", "airflow-paimon tags sales.orders --json", cmd_tags)
    add_table_arguments(p)

    p = add_command(subs, "files", "list the data files of the latest snapshot (or of a tag or snapshot)",
                    "airflow-paimon files sales.orders --tag 2026-11-20", cmd_files)
    add_table_arguments(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tag", metavar="NAME", help="the files of this tag")
    g.add_argument("--snapshot", metavar="N", type=int, help="the files of this snapshot")
