"""Model-based test of table upkeep: random commits (inserts, updates, deletes, compactions), schema changes
(columns added, renamed, dropped, re-added under an old name, widened), tag creation, deletion, renaming and
replacing, snapshot expiry with random retention, tag expiry, rollback, orphan cleanup and crashes in the middle
of destructive operations (a crashed rollback is then run again, as a task's retry would: until then the table may
hold its restored target beside the newer snapshots), checked against a simple in-memory model after every step:

* the retained snapshots and the tags are exactly the model's, and each reads exactly the model's rows (every
  snapshot is read with the current schema: the model keeps values by field id, so a renamed column shows its
  old values, a column added since reads NULL in old rows, a dropped one is gone for good);
* no file any retained snapshot or tag references (data files it reads, manifest lists, manifests, the index
  manifest and the index files it lists) is missing;
* after orphan cleanup (with `older_than` in the future, so every unreferenced file is eligible) no unreferenced
  data, manifest or index file remains;
* every data file lies in the partition directory Paimon names for its partition values.

It runs on two tables. One is partitioned by a string. The other is partitioned by a DATE and a TIMESTAMP,
with `partition.legacy-name` drawn per run. Dates before 1970 and sub-second times check both spellings. That
table also has a `sequence.field` whose values include NULLs and ties. Within a write, one key may come several
times. The model picks the version of each key as Paimon does: the higher sequence value wins and NULL is older
than any value; on a tie the later write wins (later in the batch or a later commit). Deletes carry no sequence
value, so a delete is older than a version that has one and leaves it in place. A partition value cannot be NULL
there (Paimon makes primary-key columns NOT NULL, and the key holds the partition columns). Three more kinds of
the string-partitioned table run fewer times: one with a nested column, one with dynamic buckets (`bucket = -1`, at
most 4 keys per bucket, so that commits replace HASH index files), one with deletion vectors (each write a commit
pair whose APPEND snapshot reads as the one before it). Two append tables with deletion vectors (one unaware of
buckets, one bucketed by `id`) run the same steps, their upserts as UPDATEs on the key columns. Writing a NULL
partition value is a bad input, which must fail and leave the table as it was.

Reads are memoised by (base manifest list, delta manifest list, schema id): manifests, data files and schema
files are immutable, and the existence of every file a snapshot reads is checked at every step, so an unchanged key
means unchanged rows.
Every 50 steps and at the end of each run the memo is dropped and everything is read again.

Size: PAIMON_MODEL_EXAMPLES (default 50) runs, half on each table, of up to PAIMON_MODEL_STEPS (default 50)
steps, the same ones on every run (derandomised); PAIMON_MODEL_RANDOM=1 draws new ones. The number of operations
run is printed (see it with `pytest -s`) and recorded as the `model_operations` property of the test (JUnit XML).
On the DATE/TIMESTAMP table the test also checks, from 10 runs on, that the runs decided versions by NULL sequence
values and by ties, and used both `partition.legacy-name` values.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from airflow_paimon.format import Catalog, PaimonError, TagNotFoundError, data_file
from airflow_paimon.format.schema_change import SchemaChange
from airflow_paimon.format.tags import TagAlreadyExistsError
from airflow_paimon.format.values import parse_duration

from .upkeep_helpers import FUTURE, FailAfter, all_files, index_paths, judged_files, make_table, referenced_names

EXAMPLES = int(os.environ.get("PAIMON_MODEL_EXAMPLES", "50"))
STEPS = int(os.environ.get("PAIMON_MODEL_STEPS", "50"))
FULL_CHECK_EVERY = 50
TAG_NAMES = ["t1", "t2", "t3", "2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"]
PERIODIC_MAX = 3
COUNTS = {"operations": 0, "runs": 0, "errors_expected": 0, "crashes": 0,
          "null_sequence_decided": 0, "sequence_tie_decided": 0, "legacy_name_runs": 0}
KINDS: dict[str, int] = {}
SECONDS: dict[str, float] = {}
# Relative frequency of each kind of step.
WEIGHTS = {"upsert": 6, "delete": 3, "compact": 3, "create_tag": 4, "delete_tag": 2, "rename_tag": 1,
           "expire_tags": 1, "expire_snapshots": 3, "rollback": 2, "remove_orphans": 1, "bad_input": 1, "crash": 1,
           "add_column": 1, "rename_column": 1, "drop_column": 1, "widen_column": 1}
# Names of value columns: few, so that dropped names come back as new columns.
COLUMN_NAMES = ["v", "w", "x"]
# Partition values of the DATE/TIMESTAMP table and their directories as Paimon spells them
# (partition.legacy-name true, false): escaped `:` is %3A, TIMESTAMP(6) cast to STRING keeps 6 fraction digits.
TEMPORAL_PARTITIONS = {
    (dt.date(2026, 1, 1), dt.datetime(2026, 1, 1, 2, 30)):
        ("d=20454/ts=2026-01-01T02%3A30", "d=2026-01-01/ts=2026-01-01 02%3A30%3A00.000000"),
    (dt.date(1969, 12, 31), dt.datetime(1969, 12, 31, 23, 59, 59, 500000)):
        ("d=-1/ts=1969-12-31T23%3A59%3A59.500", "d=1969-12-31/ts=1969-12-31 23%3A59%3A59.500000"),
    (dt.date(2026, 1, 1), dt.datetime(2026, 11, 22, 0, 0, 5, 123456)):
        ("d=20454/ts=2026-11-22T00%3A00%3A05.123456", "d=2026-01-01/ts=2026-11-22 00%3A00%3A05.123456"),
}
STRING_PARTITIONS = {("a",): ("p=a", "p=a"), ("b",): ("p=b", "p=b")}


class _Patch:
    """A minimal monkeypatch for FailAfter outside pytest fixtures."""

    def setattr(self, obj, name, value):
        if value is None:
            obj.__dict__.pop(name, None)
        else:
            setattr(obj, name, value)


def _model_value(value):
    """The model's value of a read value: a nested column's value is its ROW's `n` (the rest derives from it)."""
    if isinstance(value, dict):
        assert value["l"] == [value["n"], None], value
        return value["n"]
    return value


def _newer_or_same(new, old) -> bool:
    """Paimon's order of two sequence values: NULL below every value (so a tie of NULLs is a tie)."""
    return old is None or (new is not None and new >= old)


class UpkeepModel(RuleBasedStateMachine):
    """The table partitioned by a string, without a sequence field."""

    PARTITIONS = STRING_PARTITIONS
    SEQUENCE = None

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="paimon-model-")
        self.table = None
        self.legacy = True
        # Snapshot rows: (id, p, ((field id, value), ...), sequence value) with p the tuple of partition values;
        # value columns of the current schema: [name, id, type].
        self.snaps: dict[int, frozenset] = {}
        self.columns: list[list] = []
        self.highest_field_id = 0
        self.pcols: list[str] = []
        self.fixed: set[str] = set()
        self.tags: dict[str, dict] = {}
        self.memo: dict[tuple, frozenset] = {}
        self.entries_memo: dict[tuple, set] = {}
        self.steps = 0
        COUNTS["runs"] += 1

    def teardown(self):
        try:
            if self.snaps:
                self.memo.clear()
                self._check()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- helpers -------------------------------------------------------------------------------------
    def _op(self):
        COUNTS["operations"] += 1
        self.steps += 1

    @property
    def latest(self) -> int | None:
        return max(self.snaps) if self.snaps else None

    def _create_table(self) -> None:
        self.table = make_table(self.dir, partitioned=True, buckets=2,
                                options={"tag.num-retained-max": str(PERIODIC_MAX)})

    def _latest_rows(self) -> dict:
        """{(p, id): (values, sequence value)} of the latest snapshot."""
        if not self.snaps:
            return {}
        return {(r[1], r[0]): (r[2], r[3]) for r in self.snaps[self.latest]}

    def _committed(self, snap, rows: dict) -> None:
        assert snap is not None
        assert snap.id == (self.latest or 0) + 1, (snap.id, self.latest)
        self.snaps[snap.id] = frozenset((k[1], k[0], v[0], v[1]) for k, v in rows.items())

    def _project(self, rows: frozenset) -> frozenset:
        """Model rows as a read with the current schema returns them: values found by field id."""
        return frozenset((i, p, tuple(dict(values).get(c[1]) for c in self.columns), s) for i, p, values, s in rows)

    def _partition_data(self, p: tuple, n: int) -> dict:
        return {c: [v] * n for c, v in zip(self.pcols, p)}

    def _time(self, sid: int) -> int:
        return self.table.snapshot(sid).time_millis

    def _roots(self) -> dict:
        t = self.table
        out = {("snapshot", i): t.snapshot(i) for i in t.snapshot_manager.ids()}
        out.update({("tag", x.name): x.snapshot for x in t.tags.list()})
        return out

    def _assert_freed(self, before: dict) -> None:
        """Everything the removed roots used (data files, manifests, manifest lists) that no remaining root uses
        is gone: upkeep frees it, it does not leave it to orphan cleanup."""
        after = self._roots()
        kept = set()
        for snap in after.values():
            kept |= self._live(snap)
        used = set()
        for key, snap in before.items():
            if key not in after or after[key].base_manifest_list != snap.base_manifest_list:
                used |= self._live(snap)
        left = (used - kept) & all_files(self.table.path)
        assert not left, f"not freed: {sorted(left)}"

    # ---- commits -------------------------------------------------------------------------------------
    @initialize(ids=st.lists(st.integers(0, 12), min_size=1, max_size=8, unique=True), v=st.integers(0, 999),
                legacy=st.booleans(), data=st.data())
    def first_commit(self, ids, v, legacy, data):
        self.legacy = legacy
        COUNTS["legacy_name_runs"] += legacy
        self._create_table()
        schema = self.table.schema()
        self.pcols = list(schema.partition_keys)
        self.fixed = {"id", *self.pcols, *([self.SEQUENCE] if self.SEQUENCE else [])}
        self.columns = [[f.name, f.id, f.type] for f in schema.fields if f.name not in self.fixed]
        self.highest_field_id = schema.highest_field_id
        self.upsert(ids, min(self.PARTITIONS), v, self._draw_sequence(data.draw, len(ids)))

    def _draw_sequence(self, draw, n: int) -> list | None:
        if self.SEQUENCE is None:
            return None
        return draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=n, max_size=n))

    def upsert(self, ids, p, v, seqs):
        """Rows in batch order; each row's values differ, so the model sees which version of a key won."""
        self._op()
        data = {"id": pa.array(ids, pa.int64()), **self._partition_data(p, len(ids))}
        if self.SEQUENCE is not None:
            data[self.SEQUENCE] = pa.array(seqs, pa.int32())
        per_row = [tuple((fid, v * 100 + fid + 1_000_000 * k) for _, fid, _ in self.columns)
                   for k in range(len(ids))]
        for j, (name, _, kind) in enumerate(self.columns):
            if isinstance(kind, dict):  # a nested column: the model's value inside a ROW, also in an ARRAY
                data[name] = pa.array([{"n": values[j][1], "l": [values[j][1], None]} for values in per_row],
                                      self.table.schema().logical_arrow_schema().field(name).type)
                continue
            data[name] = pa.array([values[j][1] for values in per_row], pa.int32() if kind == "INT" else pa.int64())
        snap = self._write(pa.table(data))
        rows = self._latest_rows()
        for k, i in enumerate(ids):
            s = seqs[k] if seqs is not None else None
            old = rows.get((p, i))
            if old is None:
                rows[(p, i)] = (per_row[k], s)
                continue
            self._count_decision(s, old[1])
            if _newer_or_same(s, old[1]):
                rows[(p, i)] = (per_row[k], s)
        self._committed(snap, rows)

    def _write(self, data: pa.Table):
        return self.table.write(data)

    def _count_decision(self, new, old) -> None:
        if self.SEQUENCE is not None:
            if new is None or old is None:
                COUNTS["null_sequence_decided"] += 1
            elif new == old:
                COUNTS["sequence_tie_decided"] += 1

    def delete(self, ids, p):
        """Deletes by key: their sequence value is NULL, so they lose against a version that has one."""
        self._op()
        snap = self.table.delete(pa.table({"id": pa.array(ids, pa.int64()), **self._partition_data(p, len(ids))}))
        rows = self._latest_rows()
        for i in ids:
            old = rows.get((p, i))
            if old is None:
                continue
            self._count_decision(None, old[1])
            if _newer_or_same(None, old[1]):
                del rows[(p, i)]
        self._committed(snap, rows)

    def compact(self):
        self._op()
        snap = self.table.maintenance.compact()
        if snap is not None:
            self._committed(snap, self._latest_rows())

    # ---- schema changes ------------------------------------------------------------------------------
    def _altered(self, change) -> None:
        self.table.alter(change)
        got = [[f.name, f.id, f.type] for f in self.table.schema().fields if f.name not in self.fixed]
        assert got == self.columns, (got, self.columns)
        assert self.table.schema().highest_field_id == self.highest_field_id

    def add_column(self, name, kind):
        self._op()
        if any(c[0] == name for c in self.columns):
            return
        self.highest_field_id += 1
        self.columns.append([name, self.highest_field_id, kind])
        self._altered(SchemaChange.add_column(name, kind))

    def rename_column(self, pick, new):
        self._op()
        if not self.columns or any(c[0] == new for c in self.columns):
            return
        column = self.columns[pick % len(self.columns)]
        old, column[0] = column[0], new
        self._altered(SchemaChange.rename_column(old, new))

    def drop_column(self, pick):
        self._op()
        if not self.columns:
            return
        name = self.columns.pop(pick % len(self.columns))[0]
        self._altered(SchemaChange.drop_column(name))

    def widen_column(self, pick):
        self._op()
        narrow = [c for c in self.columns if c[2] == "INT"]
        if not narrow:
            return
        column = narrow[pick % len(narrow)]
        column[2] = "BIGINT"
        self._altered(SchemaChange.update_column_type(column[0], "BIGINT"))

    # ---- tags ----------------------------------------------------------------------------------------
    def create_tag(self, name, source, pick, ttl, replace):
        self._op()
        if source == "tag" and self.tags:
            sid = sorted(t["sid"] for t in self.tags.values())[pick % len(self.tags)]
            rows = next(t["rows"] for t in self.tags.values() if t["sid"] == sid)
        elif source == "snapshot":
            sid = sorted(self.snaps)[pick % len(self.snaps)]
            rows = self.snaps[sid]
        else:
            sid, rows = self.latest, self.snaps[self.latest]
        existing = self.tags.get(name)
        if existing is not None and existing["sid"] != sid and not replace:
            COUNTS["errors_expected"] += 1
            with pytest.raises(TagAlreadyExistsError):
                self.table.tags.create(name, snapshot_id=None if source == "latest" else sid,
                                       time_retained=ttl, replace=False)
            return
        tag = self.table.tags.create(name, snapshot_id=None if source == "latest" else sid, time_retained=ttl,
                                     replace=replace)
        assert tag.snapshot_id == sid
        if existing is not None and existing["sid"] == sid:
            wanted = parse_duration(ttl) if ttl is not None else None
            if replace and wanted is not None and wanted != existing["ttl"]:
                assert tag.time_retained == wanted     # replace on the same snapshot: a new retention
                existing.update(ttl=tag.time_retained, created=tag.create_time)
            else:
                assert tag.time_retained == existing["ttl"]  # idempotent: unchanged
            return
        self.tags[name] = {"sid": sid, "rows": rows, "ttl": tag.time_retained, "created": tag.create_time}

    def delete_tag(self, name):
        self._op()
        if name not in self.tags:
            COUNTS["errors_expected"] += 1
            with pytest.raises(TagNotFoundError):
                self.table.maintenance.delete_tag(name)
            return
        before = self._roots()
        result = self.table.maintenance.delete_tag(name)
        self._assert_freed(before)
        assert result.tags == [name]
        del self.tags[name]

    def rename_tag(self, old, new):
        self._op()
        if old not in self.tags:
            COUNTS["errors_expected"] += 1
            with pytest.raises(TagNotFoundError):
                self.table.tags.rename(old, new)
            return
        if old != new and new in self.tags:
            COUNTS["errors_expected"] += 1
            with pytest.raises(TagAlreadyExistsError):
                self.table.tags.rename(old, new)
            return
        self.table.tags.rename(old, new)
        self.tags[new] = self.tags.pop(old)

    def expire_tags(self, offset):
        self._op()
        now = dt.datetime.now() + offset
        expected = {n for n, t in self.tags.items() if t["ttl"] is not None and now > t["created"] + t["ttl"]}
        periodic = sorted(n for n in self.tags if n.startswith("2026-") and n not in expected)
        expected |= set(periodic[:max(len(periodic) - PERIODIC_MAX, 0)])
        before = self._roots()
        result = self.table.maintenance.expire_tags(now=now)
        self._assert_freed(before)
        assert set(result.tags) == expected
        for n in expected:
            del self.tags[n]

    # ---- expiry --------------------------------------------------------------------------------------
    def expire_snapshots(self, rmin, extra, limit, timed, pick):
        self._op()
        ids = sorted(self.snaps)
        if timed:
            threshold = self._time(ids[pick % len(ids)])
        else:
            threshold = int(FUTURE.timestamp() * 1000)
        rmax = None if extra is None else rmin + extra
        earliest, latest = ids[0], ids[-1]
        keep_from = max(latest - (rmax if rmax is not None else 2**31 - 1) + 1, earliest)
        end = min(latest - rmin + 1, earliest + (limit if limit is not None else 50))  # snapshot.expire.limit
        stop = end
        for sid in range(keep_from, end):
            if sid + 1 in self.snaps and threshold <= self._time(sid + 1):
                stop = sid
                break
        expected = [i for i in ids if i < stop]
        before = self._roots()
        result = self.table.maintenance.expire_snapshots(retain_min=rmin, retain_max=rmax, older_than=threshold,
                                             max_deletes=limit)
        self._assert_freed(before)
        assert result.snapshots == expected
        for sid in expected:
            del self.snaps[sid]

    # ---- rollback ------------------------------------------------------------------------------------
    def _rollback_target(self, kind, pick):
        if kind == "tag" and self.tags:
            name = sorted(self.tags)[pick % len(self.tags)]
            return {"to_tag": name}, self.tags[name]["sid"], self.tags[name]["rows"]
        sid = sorted(self.snaps)[pick % len(self.snaps)]
        if kind == "time":
            t = self._time(sid)
            sid = max(i for i in self.snaps if self._time(i) <= t)
            return {"to_time": dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc)}, sid, self.snaps[sid]
        return {"to_snapshot": sid}, sid, self.snaps[sid]

    def _apply_rollback(self, sid, rows):
        for i in [i for i in self.snaps if i > sid]:
            del self.snaps[i]
        self.snaps[sid] = rows
        for n in [n for n, t in self.tags.items() if t["sid"] > sid]:
            del self.tags[n]

    def rollback(self, kind, pick):
        self._op()
        target, sid, rows = self._rollback_target(kind, pick)
        before = self._roots()
        result = self.table.maintenance.rollback(**target)
        self._assert_freed(before)
        assert result.rolled_back_to == sid
        assert (result.restored_snapshot is not None) == (sid not in self.snaps)
        self._apply_rollback(sid, rows)

    # ---- orphans ---------------------------------------------------------------------------------------
    def remove_orphans(self):
        self._op()
        self.table.maintenance.remove_orphan_files(older_than=FUTURE)
        judged = {p.rsplit("/", 1)[-1] for p in judged_files(self.table)}
        leftover = judged - referenced_names(self.table)
        assert not leftover, f"unreferenced files survived orphan cleanup: {sorted(leftover)}"

    # ---- bad inputs ------------------------------------------------------------------------------------
    def bad_input(self, which):
        self._op()
        COUNTS["errors_expected"] += 1
        before = all_files(self.table.path)
        with pytest.raises(PaimonError):
            if which == "name":
                self.table.tags.create("12")
            elif which == "retain":
                self.table.maintenance.expire_snapshots(retain_min=3, retain_max=1)
            elif which == "target":
                self.table.maintenance.rollback(to_tag="no-such-thing")
            elif which == "schema":
                self.table.alter(SchemaChange.rename_column(self.pcols[0], "q"))
            elif which == "null_partition":
                data = {"id": pa.array([1, 2], pa.int64()), **self._partition_data(min(self.PARTITIONS), 2)}
                data[self.pcols[-1]] = pa.array([None, None], self.table.schema().arrow_schema().field(
                    self.pcols[-1]).type)
                self.table.write(pa.table(data))
            else:
                self.table.maintenance.remove_orphan_files(older_than="soon")
        assert all_files(self.table.path) == before

    # ---- crashes ---------------------------------------------------------------------------------------
    def crash(self, op, n, pick):
        self._op()
        COUNTS["crashes"] += 1
        fail = FailAfter(_Patch(), self.table.io, n)
        restored_rows = retry = None
        try:
            if op == "expire":
                self.table.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
            elif op == "rollback":
                retry, sid, rows = self._rollback_target("tag" if pick % 2 else "snapshot", pick)
                restored_rows = (sid, rows)
                self.table.maintenance.rollback(**retry)
            elif self.tags:
                self.table.maintenance.delete_tag(sorted(self.tags)[pick % len(self.tags)])
        except FailAfter.Crash:
            pass
        finally:
            fail.undo()
        # Reconcile: whatever roots survived must be ones the model knows (or the restored rollback target).
        listed = set(self.table.snapshot_manager.ids())
        if restored_rows is not None and restored_rows[0] in listed and restored_rows[0] not in self.snaps:
            self.snaps[restored_rows[0]] = restored_rows[1]
        assert listed <= set(self.snaps), (listed, sorted(self.snaps))
        for i in set(self.snaps) - listed:
            del self.snaps[i]
        tags = set(self.table.tags.names())
        assert tags <= set(self.tags)
        for name in set(self.tags) - tags:
            del self.tags[name]
        if retry is not None:
            # A crashed rollback may leave the restored target beside the newer snapshots it had yet to delete;
            # it is finished the way a task's retry finishes it: the same rollback again.
            sid, rows = restored_rows
            before = self._roots()
            assert self.table.maintenance.rollback(**retry).rolled_back_to == sid
            self._assert_freed(before)
            self._apply_rollback(sid, rows)

    # ---- one weighted step ------------------------------------------------------------------------------
    @rule(kind=st.sampled_from([k for k, w in WEIGHTS.items() for _ in range(w)]), data=st.data())
    def step(self, kind, data):
        KINDS[kind] = KINDS.get(kind, 0) + 1
        started = time.perf_counter()
        try:
            self._step(kind, data.draw)
        finally:
            SECONDS[kind] = SECONDS.get(kind, 0.0) + time.perf_counter() - started

    def _step(self, kind, draw):
        rows = st.lists(st.integers(0, 12), min_size=1, max_size=6, unique=True)
        part = st.sampled_from(sorted(self.PARTITIONS))
        pick = st.integers(0, 1000)
        if kind == "upsert":
            # With a sequence field a key may come twice in one write: its versions are ordered within the batch.
            ids = draw(rows if self.SEQUENCE is None else st.lists(st.integers(0, 12), min_size=1, max_size=6))
            self.upsert(ids, draw(part), draw(st.integers(0, 999)), self._draw_sequence(draw, len(ids)))
        elif kind == "delete":
            self.delete(draw(rows), draw(part))
        elif kind == "compact":
            self.compact()
        elif kind == "add_column":
            self.add_column(draw(st.sampled_from(COLUMN_NAMES)), draw(st.sampled_from(["INT", "BIGINT"])))
        elif kind == "rename_column":
            self.rename_column(draw(pick), draw(st.sampled_from(COLUMN_NAMES)))
        elif kind == "drop_column":
            self.drop_column(draw(pick))
        elif kind == "widen_column":
            self.widen_column(draw(pick))
        elif kind == "create_tag":
            self.create_tag(draw(st.sampled_from(TAG_NAMES)), draw(st.sampled_from(["latest", "snapshot", "tag"])),
                            draw(pick), draw(st.sampled_from([None, None, "1 h", "30 d"])), draw(st.booleans()))
        elif kind == "delete_tag":
            known = sorted(self.tags)
            name = draw(st.sampled_from(known)) if known and draw(st.integers(0, 4)) else \
                draw(st.sampled_from(TAG_NAMES))
            self.delete_tag(name)
        elif kind == "rename_tag":
            known = sorted(self.tags) or TAG_NAMES
            self.rename_tag(draw(st.sampled_from(known)), draw(st.sampled_from(TAG_NAMES)))
        elif kind == "expire_tags":
            self.expire_tags(draw(st.sampled_from([dt.timedelta(0), dt.timedelta(hours=2), dt.timedelta(days=40)])))
        elif kind == "expire_snapshots":
            self.expire_snapshots(draw(st.integers(1, 4)), draw(st.one_of(st.none(), st.integers(0, 4))),
                                  draw(st.one_of(st.none(), st.integers(1, 8))), draw(st.booleans()), draw(pick))
        elif kind == "rollback":
            self.rollback(draw(st.sampled_from(["snapshot", "tag", "time"])), draw(pick))
        elif kind == "remove_orphans":
            self.remove_orphans()
        elif kind == "bad_input":
            self.bad_input(draw(st.sampled_from(["name", "retain", "target", "older", "schema"]
                                                + (["null_partition"] if self.SEQUENCE else []))))
        elif kind == "crash":
            self.crash(draw(st.sampled_from(["expire", "rollback", "delete_tag"])), draw(st.integers(0, 25)),
                       draw(pick))
        else:
            raise AssertionError(kind)

    # ---- invariants ------------------------------------------------------------------------------------
    def _live(self, snap) -> set:
        key = (snap.base_manifest_list, snap.delta_manifest_list, snap.index_manifest)
        got = self.entries_memo.get(key)
        if got is None:
            t = self.table
            codec = t.partition_codec
            mdir = f"{t.path}/manifest"
            got = {f"{mdir}/{snap.base_manifest_list}", f"{mdir}/{snap.delta_manifest_list}"}
            for lst in (snap.base_manifest_list, snap.delta_manifest_list):
                got |= {f"{mdir}/{m.file_name}" for m in t.manifest_io.read_list(lst)}
            for e in t.file_entries(snap):
                got.add(t.data_file_path(codec.from_bytes(e.partition), e.bucket, e.file))
            got |= index_paths(t, snap)
            self.entries_memo[key] = got
        return got

    def _rows_of(self, snap, read) -> frozenset:
        key = (snap.base_manifest_list, snap.delta_manifest_list, self.table.schema().id)
        got = self.memo.get(key)
        if got is None:
            names = [c[0] for c in self.columns]
            got = self.memo[key] = frozenset(
                (r["id"], tuple(r[c] for c in self.pcols), tuple(_model_value(r[n]) for n in names),
                 r[self.SEQUENCE] if self.SEQUENCE else None) for r in read().to_pylist())
        return got

    def _check_directories(self, what: str, snap, rows: frozenset) -> None:
        """Each data file is in the directory Paimon names for its partition, and each partition with rows has
        files there (the names are the table's literals, not the library's)."""
        spelled = {p: names[0 if self.legacy else 1] for p, names in self.PARTITIONS.items()}
        root = f"{self.table.path}/"
        dirs = {path[len(root):].rsplit("/bucket-", 1)[0] for path in self._live(snap) if "/bucket-" in path}
        assert dirs <= set(spelled.values()), f"{what}: partition directories {sorted(dirs)}"
        assert {spelled[p] for _, p, _, _ in rows} <= dirs, f"{what}: partitions with rows have no files"

    @invariant()
    def check(self):
        started = time.perf_counter()
        try:
            self._invariant()
        finally:
            SECONDS["(checks)"] = SECONDS.get("(checks)", 0.0) + time.perf_counter() - started

    def _invariant(self):
        if self.steps and self.steps % FULL_CHECK_EVERY == 0:
            self.memo.clear()
        self._check()

    def _check(self):
        t = self.table
        assert t.snapshot_manager.ids() == sorted(self.snaps)
        tags = {x.name: x for x in t.tags.list()}
        assert set(tags) == set(self.tags)
        existing = all_files(t.path)
        for sid, rows in self.snaps.items():
            snap = t.snapshot(sid)
            missing = self._live(snap) - existing
            assert not missing, f"snapshot {sid} lost {sorted(missing)}"
            assert self._rows_of(snap, lambda sid=sid: t.read(snapshot_id=sid)) == self._project(rows), \
                f"snapshot {sid} differs"
            self._check_directories(f"snapshot {sid}", snap, rows)
        for name, model in self.tags.items():
            snap = tags[name].snapshot
            assert snap.id == model["sid"]
            missing = self._live(snap) - existing
            assert not missing, f"tag {name} lost {sorted(missing)}"
            assert self._rows_of(snap, lambda name=name: t.read(tag=name)) == self._project(model["rows"]), \
                f"tag {name} differs"
            self._check_directories(f"tag {name}", snap, model["rows"])
        if self.snaps:
            assert t.latest_snapshot().id == self.latest


class TemporalUpkeepModel(UpkeepModel):
    """The table partitioned by a DATE and a TIMESTAMP, with a nullable `sequence.field`."""

    PARTITIONS = TEMPORAL_PARTITIONS
    SEQUENCE = "s"

    def _create_table(self) -> None:
        catalog = Catalog(self.dir)
        catalog.create_database("db", ignore_if_exists=True)
        schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("ts", pa.timestamp("us")),
                            (self.SEQUENCE, pa.int32()), ("v", pa.int64())])
        self.table = catalog.create_table(
            "db.t", schema, primary_keys=["d", "ts", "id"], partition_keys=["d", "ts"],
            options={"bucket": "2", "sequence.field": self.SEQUENCE, "tag.num-retained-max": str(PERIODIC_MAX),
                     "partition.legacy-name": str(self.legacy).lower()})


class NestedUpkeepModel(UpkeepModel):
    """The string-partitioned table with a nested column (ROW of BIGINT and ARRAY<BIGINT>) besides `v`."""

    def _create_table(self) -> None:
        catalog = Catalog(self.dir)
        catalog.create_database("db", ignore_if_exists=True)
        nested = pa.struct([("n", pa.int64()), ("l", pa.list_(pa.int64()))])
        schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("nested", nested)])
        self.table = catalog.create_table("db.t", schema, primary_keys=["p", "id"], partition_keys=["p"],
                                          options={"bucket": "2", "tag.num-retained-max": str(PERIODIC_MAX)})


class DynamicBucketUpkeepModel(UpkeepModel):
    """The string-partitioned table with dynamic buckets (`bucket = -1`): at most 4 keys per bucket, so that keys
    spread over several buckets and each commit replaces some HASH index files; every snapshot and tag must keep
    its index files (they are part of `_live`)."""

    def _create_table(self) -> None:
        self.table = make_table(self.dir, partitioned=True, buckets=-1,
                                options={"tag.num-retained-max": str(PERIODIC_MAX),
                                         "dynamic-bucket.target-row-num": "4"})


class _Pending(frozenset):
    """The rows of an APPEND snapshot of a deletion-vector table: the table's rows with its level-0 files merged
    (what the next write and compaction build on, also after a rollback to it), and `visible`, what a read of it
    returns (level 0 skipped: the rows before it)."""

    visible: frozenset


class DeletionVectorUpkeepModel(UpkeepModel):
    """The string-partitioned table with deletion vectors: each write is Paimon's commit pair, an APPEND of level-0
    files (which a read of such a table skips: that snapshot reads as the one before it) and a COMPACT that moves
    them up and marks the rows they replace in the vectors; every snapshot and tag must keep its index files. A
    rollback to such an APPEND leaves its level-0 files pending: the next compaction (or write) applies them."""

    def _project(self, rows: frozenset) -> frozenset:
        return super()._project(getattr(rows, "visible", rows))

    def _rollback_target(self, kind, pick):
        """Never the APPEND of a commit pair: after a rollback to it, its level-0 files stay pending bucket by
        bucket until each bucket is next compacted (as in Paimon; tests/format/test_deletion_vector_kinds.py),
        and this model does not track buckets."""
        tags = sorted(n for n, t in self.tags.items() if not isinstance(t["rows"], _Pending))
        if kind == "tag" and tags:
            name = tags[pick % len(tags)]
            return {"to_tag": name}, self.tags[name]["sid"], self.tags[name]["rows"]
        sids = sorted(i for i, r in self.snaps.items() if not isinstance(r, _Pending))
        sid = sids[pick % len(sids)]
        if kind == "time":
            t = self._time(sid)
            at = max(i for i in self.snaps if self._time(i) <= t)
            if not isinstance(self.snaps[at], _Pending):
                return {"to_time": dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc)}, at, self.snaps[at]
        return {"to_snapshot": sid}, sid, self.snaps[sid]

    def _create_table(self) -> None:
        self.table = make_table(self.dir, partitioned=True, buckets=2,
                                options={"tag.num-retained-max": str(PERIODIC_MAX),
                                         "deletion-vectors.enabled": "true"})

    def _committed(self, snap, rows: dict) -> None:
        assert snap is not None
        before = self.latest or 0
        if snap.id == before + 2:
            assert (self.table.snapshot(snap.id - 1).commit_kind, snap.commit_kind) == ("APPEND", "COMPACT")
            previous = self.snaps.get(before, frozenset())
            pending = _Pending((k[1], k[0], v[0], v[1]) for k, v in rows.items())
            pending.visible = getattr(previous, "visible", previous)
            self.snaps[snap.id - 1] = pending
        super()._committed(snap, rows)


class AppendUpkeepModel(UpkeepModel):
    """An append table with deletion vectors, partitioned by the string, without a key: an upsert is its UPDATE
    on (p, id) (Table.update: the matching rows marked deleted in the vectors, the new ones appended; a key given
    twice in a batch is sent once, its last version), a delete marks the matching rows (no commit when none
    matches); compaction folds the vectors in."""

    OPTIONS: dict[str, str] = {}

    def _create_table(self) -> None:
        catalog = Catalog(self.dir)
        catalog.create_database("db", ignore_if_exists=True)
        schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
        self.table = catalog.create_table("db.t", schema, partition_keys=["p"], options={
            "deletion-vectors.enabled": "true", "tag.num-retained-max": str(PERIODIC_MAX), **self.OPTIONS})

    def _write(self, data: pa.Table):
        last = {(p, i): n for n, (p, i) in enumerate(zip(data.column("p").to_pylist(), data.column("id").to_pylist()))}
        return self.table.update(data.take(pa.array(sorted(last.values()), pa.int64())), on=["p", "id"])

    def _committed(self, snap, rows: dict) -> None:
        if snap is None:   # a delete that matched no row commits nothing
            assert rows == self._latest_rows()
            return
        super()._committed(snap, rows)


class BucketedAppendUpkeepModel(AppendUpkeepModel):
    """The append table with deletion vectors and two buckets by `id` (`bucket-key`)."""

    OPTIONS = {"bucket": "2", "bucket-key": "id"}


@pytest.mark.parametrize("machine", [UpkeepModel, TemporalUpkeepModel, NestedUpkeepModel, DynamicBucketUpkeepModel,
                                     DeletionVectorUpkeepModel, AppendUpkeepModel, BucketedAppendUpkeepModel],
                         ids=["string", "date-timestamp", "nested", "dynamic-bucket", "deletion-vectors", "append",
                              "bucketed-append"])
def test_upkeep_model(machine, record_property, monkeypatch):
    # Files of many row groups, so that reads merge across groups and skip those newer files rewrote.
    monkeypatch.setattr(data_file, "ROW_GROUP_ROWS", 4)
    for k in COUNTS:
        COUNTS[k] = 0
    KINDS.clear()
    SECONDS.clear()
    randomize = os.environ.get("PAIMON_MODEL_RANDOM") == "1"
    # The runs are shared between the two tables: together they take about three minutes on two cores.
    # The nested, dynamic-bucket, deletion-vector and append tables are table kinds rather than other key
    # layouts: a fifth of the runs (at least one) suffice.
    examples = {UpkeepModel: EXAMPLES // 2, TemporalUpkeepModel: EXAMPLES - EXAMPLES // 2,
                NestedUpkeepModel: max(1, EXAMPLES // 5), DynamicBucketUpkeepModel: max(1, EXAMPLES // 5),
                DeletionVectorUpkeepModel: max(1, EXAMPLES // 5), AppendUpkeepModel: max(1, EXAMPLES // 5),
                BucketedAppendUpkeepModel: max(1, EXAMPLES // 5)}[machine]
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=STEPS, deadline=None, derandomize=not randomize,
        database=None, suppress_health_check=list(HealthCheck)))
    record_property("model_operations", COUNTS["operations"])
    print(f"\nupkeep model: {COUNTS['operations']} operations in {COUNTS['runs']} runs "
          f"({COUNTS['errors_expected']} expected errors, {COUNTS['crashes']} injected crashes)")
    print(f"  checks after every step: {SECONDS.get('(checks)', 0):.1f}s")
    print("  by kind: " + ", ".join(f"{k} {v} ({SECONDS.get(k, 0):.1f}s)" for k, v in sorted(KINDS.items())))
    assert COUNTS["operations"] >= examples * 5
    if machine.SEQUENCE is not None:
        print(f"  versions decided by a NULL sequence value: {COUNTS['null_sequence_decided']}, by a tie: "
              f"{COUNTS['sequence_tie_decided']}; runs with partition.legacy-name = true: "
              f"{COUNTS['legacy_name_runs']} of {COUNTS['runs']}")
        if COUNTS["runs"] >= 10:
            assert COUNTS["null_sequence_decided"] and COUNTS["sequence_tie_decided"]
            assert 0 < COUNTS["legacy_name_runs"] < COUNTS["runs"]
