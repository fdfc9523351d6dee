"""The demo behind `make demo`: the example merge DAG run for several consecutive past days, then the change-feed
DAG on the same days (the merged table's daily changes into a lookup-changelog table, a replica and exports),
then a report ending with each day's changes by `_change_type`.

Everything lives under `demo/` in the repository (ignored by git): an Airflow home on SQLite, a warehouse, and
the daily incremental files. Re-running is safe: days already done are skipped (their tags exist), merges are
exactly-once, and the report is read back from the table.

    python scripts/demo.py             # run the days and print the report
    python scripts/demo.py standalone  # `airflow standalone` on the same home (what `make airflow` runs)

The warehouse can be on an object store instead (`make demo WAREHOUSE=s3://bucket/path OPTIONS="..."`):

    DEMO_WAREHOUSE    the warehouse URI (default: demo/warehouse)
    DEMO_OPTIONS      its filesystem options under Paimon's names, "key=value" separated by spaces, e.g.
                      "s3.endpoint=http://127.0.0.1:9000 s3.path.style.access=true"; the keys are best left to
                      AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (s3.access-key / s3.secret-key given here become
                      the connection's login and password, which Airflow masks)
    DEMO_DIR          the demo's folder (default: demo/)
    DEMO_DAYS, DEMO_ROWS   days run (default 7, a whole week) and orders in the first load (default 200,000)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("DEMO_DIR") or ROOT / "demo").resolve()
HOME = WORK / "airflow"
WAREHOUSE = os.environ.get("DEMO_WAREHOUSE") or str(WORK / "warehouse")
INCOMING = WORK / "incoming"
TABLE = "demo.orders"
CDC_TABLE = "demo.orders_cdc"
REPLICA = "demo.orders_replica"
EXPORTS = WORK / "exports"
DAYS = int(os.environ.get("DEMO_DAYS") or 7)  # a whole week, so the Sunday compaction and orphan cleanup run too
HISTORY_ROWS = int(os.environ.get("DEMO_ROWS") or 200_000)


def store_options(text: str) -> dict[str, str]:
    """``"k=v k=v"`` -> options; anything without ``=`` is refused naming it."""
    options = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"DEMO_OPTIONS: {item!r} is not key=value")
        options[key] = value
    return options


OPTIONS = store_options(os.environ.get("DEMO_OPTIONS", ""))


def catalog():
    from airflow_paimon.format import Catalog

    return Catalog(WAREHOUSE, OPTIONS)


def paimon_connection() -> str:
    """The ``paimon_default`` connection: the warehouse and its options, keys as login and password."""
    extra = {"warehouse": WAREHOUSE, **{k: v for k, v in OPTIONS.items() if k not in SECRET_OPTIONS}}
    connection: dict = {"conn_type": "paimon", "extra": extra}
    for option, field in SECRET_OPTIONS.items():
        if option in OPTIONS:
            connection[field] = OPTIONS[option]
    return json.dumps(connection)


SECRET_OPTIONS = {"s3.access-key": "login", "s3.secret-key": "password"}


def configure_environment() -> None:
    """Point Airflow, the connections and the example DAGs at the demo folder (before Airflow is imported)."""
    HOME.mkdir(parents=True, exist_ok=True)
    bin_dir = str(Path(sys.executable).parent)
    os.environ.update({
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "AIRFLOW_CONN_PAIMON_DEFAULT": paimon_connection(),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "PAIMON_MERGE_TABLE": TABLE,
        "PAIMON_MERGE_INCOMING": str(INCOMING),
        "PAIMON_MERGE_SHUFFLE_PARTITIONS": "4",
        "PAIMON_DAILY_TAGS_TABLE": TABLE,
        "PAIMON_WAREHOUSE": WAREHOUSE,
        "PAIMON_CHANGE_FEED_SOURCE": TABLE,
        "PAIMON_CHANGE_FEED_TABLE": CDC_TABLE,
        "PAIMON_CHANGE_FEED_REPLICA": REPLICA,
        "PAIMON_CHANGE_FEED_EXPORT_PATH": str(EXPORTS),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
    })


def migrate_metadata_db() -> None:
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def demo_days(today: dt.date) -> list[dt.date]:
    return [today - dt.timedelta(days=n) for n in range(DAYS, 0, -1)]


def create_history(first_day: dt.date):
    """The historical table, created once with a first load of HISTORY_ROWS orders."""
    import numpy as np
    import pyarrow as pa

    cat = catalog()
    cat.create_database("demo", ignore_if_exists=True)
    if cat.table_exists(TABLE):
        return cat.get_table(TABLE)
    schema = pa.schema([("id", pa.int64()), ("customer", pa.string()), ("status", pa.string()),
                        ("amount", pa.float64()), ("updated_at", pa.timestamp("us"))])
    table = cat.create_table(TABLE, schema, primary_keys=["id"], options={
        "bucket": "4",
        "sequence.field": "updated_at",
        # Small retention so that the demo's expiry has something to do.
        "snapshot.num-retained.min": "2",
        "snapshot.num-retained.max": "3",
        "snapshot.time-retained": "1 s",
        # Tags are what tell a re-run that a day is done, so the demo keeps more of them than it has days.
        "tag.num-retained-max": "30",
    })
    rng = np.random.default_rng(0)
    ids = np.arange(HISTORY_ROWS, dtype=np.int64)
    start = dt.datetime.combine(first_day - dt.timedelta(days=1), dt.time())
    table.write(pa.table({
        "id": ids,
        "customer": [f"customer-{i % 5000}" for i in ids],
        "status": rng.choice(["new", "paid", "shipped"], HISTORY_ROWS),
        "amount": np.round(rng.random(HISTORY_ROWS) * 500, 2),
        "updated_at": pa.array([start] * HISTORY_ROWS, pa.timestamp("us")),
    }, schema=schema), commit_user="demo:initial-load", commit_identifier=1)
    return table


def write_increment(day: dt.date, next_id: int) -> int:
    """`incoming/<day>/part-0.parquet`: 1% updates, 0.5% inserts and 0.1% deletes, with an `op` column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = INCOMING / day.isoformat()
    path = folder / "part-0.parquet"
    n_upd, n_ins, n_del = HISTORY_ROWS // 100, HISTORY_ROWS // 200, HISTORY_ROWS // 1000
    if path.exists():
        return next_id + n_ins
    rng = np.random.default_rng(day.toordinal())
    updated = rng.choice(next_id, n_upd + n_del, replace=False)
    ids = np.concatenate([updated, np.arange(next_id, next_id + n_ins)])
    ops = ["U"] * n_upd + ["D"] * n_del + ["I"] * n_ins
    when = dt.datetime.combine(day, dt.time(12))
    n = len(ids)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "id": pa.array(ids, pa.int64()),
        "customer": [f"customer-{i % 5000}" for i in ids],
        "status": rng.choice(["paid", "shipped", "returned"], n),
        "amount": np.round(rng.random(n) * 500, 2),
        "updated_at": pa.array([when] * n, pa.timestamp("us")),
        "op": ops,
    }), path)
    return next_id + n_ins


def create_change_tables(first_day: dt.date) -> None:
    """The change-feed DAG's tables, created once: the lookup-changelog table loaded with the merged table as of
    the first day's tag (and tagged that day, so the next day's export has a start), the replica, and the
    replica's consumer on the changelog table from its first snapshot (the replica gets the load too)."""
    cat = catalog()
    if cat.table_exists(CDC_TABLE):
        return
    source = cat.get_table(TABLE)
    day = first_day.isoformat()
    cdc = cat.create_table(CDC_TABLE, source.arrow_schema(), primary_keys=["id"],
                               options={"bucket": "4", "changelog-producer": "lookup"})
    cat.create_table(REPLICA, source.arrow_schema(), primary_keys=["id"], options={"bucket": "4"})
    cdc.consumers.create("replica")
    cdc.write(source.read(tag=day), commit_user="demo:initial-load", commit_identifier=1)
    cdc.create_tag(day)


@contextlib.contextmanager
def redirected_output(path: Path):
    """Send this process's stdout/stderr (and its children's, e.g. spark-submit) to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run_days(days: list[dt.date], dag_id: str = "paimon_merge_incremental") -> dict[str, dict]:
    """dag.test() of the DAG for each day; returns the XCom results of its tasks per day."""
    import pendulum
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    if bag.import_errors:
        raise SystemExit(f"the example DAGs do not import: {bag.import_errors}")
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    sync_bag_to_db(bag, "dags-folder", None)
    dag = bag.dags[dag_id]
    for task in dag.tasks:
        task.retries = 0  # a failure here should stop the demo at once, not wait for a retry
    results: dict[str, dict] = {}
    logs = WORK / "logs"
    logs.mkdir(exist_ok=True)
    for day in days:
        log = logs / f"{dag_id}-{day}.log"
        shown = log.relative_to(ROOT) if log.is_relative_to(ROOT) else log
        print(f"  {dag_id} for {day} (log: {shown}) ...", end=" ", flush=True)
        # The run of day D has the data interval [D, D+1) and its logical date is when that interval ends.
        after = day + dt.timedelta(days=1)
        with redirected_output(log):
            dr = dag.test(logical_date=pendulum.datetime(after.year, after.month, after.day, tz="UTC"))
        print(dr.state, flush=True)
        with create_session() as session:
            rows = session.execute(select(XComModel.task_id, XComModel.value).where(
                XComModel.dag_id == dag.dag_id, XComModel.run_id == dr.run_id,
                XComModel.key == "return_value")).all()
            states = {ti.task_id: str(ti.state) for ti in session.merge(dr).get_task_instances(session=session)}
        values = {task: XComModel.deserialize_value(type("X", (), {"value": v})()) for task, v in rows}
        results[day.isoformat()] = {"state": str(dr.state), "tasks": states, "xcom": values}
        if str(dr.state) != "success":
            raise SystemExit(f"the run for {day} ended {dr.state}: {states}; see {log}")
    return results


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    line = "+".join("-" * (w + 2) for w in widths)
    print(f"+{line}+")
    for i, r in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        if i == 0:
            print(f"+{line}+")
    print(f"+{line}+")


def report(results: dict[str, dict]) -> None:
    table = catalog().get_table(TABLE)
    runs = []
    for day, r in results.items():
        merge = r["xcom"].get("merge_increment") or {}
        expire = r["xcom"].get("expire_snapshots") or {}
        tag = r["xcom"].get("tag_day") or {}
        status = merge.get("status", "skipped (day already tagged)")
        compacted = "yes" if r["tasks"].get("compact") == "success" else ""
        runs.append([day, r["state"], status, merge.get("snapshot_id", ""), compacted,
                     ", ".join(tag.get("expired_tags") or []), expire.get("snapshots_expired", ""),
                     expire.get("files_freed", ""), expire.get("bytes_freed", "")])
    print_table("Runs of paimon_merge_incremental (this invocation)",
                ["day", "run", "merge", "snapshot", "compacted", "tags expired", "snapshots expired",
                 "files freed", "bytes freed"], runs)
    tags = [[t.name, t.snapshot.id, t.snapshot.commit_kind, table.read(tag=t.name, columns=["id"]).num_rows]
            for t in table.tags.list()]
    print_table(f"Tags of {TABLE}", ["tag", "snapshot", "kind", "rows"], tags)
    snaps = table.snapshots()
    kept = [[s.id, s.commit_kind, dt.datetime.fromtimestamp(s.time_millis / 1000, dt.timezone.utc)
             .strftime("%Y-%m-%d %H:%M:%S"), s.total_record_count] for s in snaps]
    print_table(f"Snapshots kept ({len(snaps)}; snapshots 1..{snaps[0].id - 1} expired)" if snaps[0].id > 1
                else f"Snapshots kept ({len(snaps)})",
                ["snapshot", "kind", "committed (UTC)", "records in files"], kept)
    print(f"\nLatest snapshot: {table.read(columns=['id']).num_rows} orders. "
          f"Warehouse: {WAREHOUSE}\nTry: .venv/bin/airflow-paimon tags {TABLE} --warehouse {WAREHOUSE}"
          + "".join(f" --option {k}=..." for k in OPTIONS) + "\n"
          "Open the Airflow UI on the same home with: make airflow")


def report_changes(days: list[dt.date]) -> None:
    """Each day's changes of the lookup-changelog table by `_change_type`, from the exports' manifests."""
    cat = catalog()
    kinds = ["insert", "update_preimage", "update_postimage", "delete"]
    lines = []
    for day in days:
        manifest = json.loads((EXPORTS / CDC_TABLE / day.isoformat() / "_SUCCESS").read_text())
        counts = manifest["counts"]
        lines.append([day.isoformat(), f"({manifest['start']}, {manifest['end']}]"]
                     + [counts.get(k, 0) for k in kinds] + [manifest["rows"]])
    cdc, replica = cat.get_table(CDC_TABLE), cat.get_table(REPLICA)
    print(f"\n{REPLICA}: {replica.read(columns=['id']).num_rows} rows, {cdc.read(columns=['id']).num_rows} in "
          f"{CDC_TABLE}; exports under {EXPORTS}")
    print_table(f"Changes of {CDC_TABLE} per day (changelog-producer = lookup, exported by paimon_change_feed)",
                ["day", "range (tags)"] + kinds + ["rows"], lines)


def main(argv: list[str]) -> int:
    configure_environment()
    if argv[:1] == ["standalone"]:
        os.execv(str(Path(sys.executable).parent / "airflow"), ["airflow", "standalone"])
    print(f"airflow-paimon demo: Airflow home {HOME}, warehouse {WAREHOUSE}")
    migrate_metadata_db()
    days = demo_days(dt.date.today())
    create_history(days[0])
    next_id = HISTORY_ROWS
    for day in days:
        next_id = write_increment(day, next_id)
    results = run_days(days)
    create_change_tables(days[0])
    run_days(days[1:], "paimon_change_feed")
    report(results)
    report_changes(days[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
