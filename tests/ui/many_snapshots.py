"""A table with thousands of snapshots and a hundred tags, made in a second or two.

One real commit is made with the library; the other snapshots are copies of its snapshot file under the next ids
and later commit times (every copy lists the same manifests, so each reads as a commit of the same files), and
the tags are made by the library. The tables view reads only metadata, so this is the shape it meets on a long-
lived table, without writing thousands of data files.
"""

from __future__ import annotations

import json
from pathlib import Path

from airflow_paimon.format import Table
from tests.e2e.tables import create_table, rows

START_MILLIS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def table_with_many_snapshots(warehouse: str, identifier: str, snapshots: int, tags: int) -> Table:
    table = create_table(warehouse, identifier)
    first = table.write(rows(1, 2, 3))
    assert first is not None and first.id == 1
    manager = table.snapshot_manager
    doc = first.to_dict()
    for sid in range(2, snapshots + 1):
        doc.update(id=sid, timeMillis=START_MILLIS + sid * 60_000, commitIdentifier=sid)
        Path(manager.path(sid)).write_text(json.dumps(doc))
    manager.commit_hint(snapshots)
    step = max(1, snapshots // tags)
    for n in range(tags):
        table.create_tag(f"t{n:03d}", snapshot_id=snapshots - n * step)
    return table
