"""The `airflow-paimon` command: every command in-process through main(argv), and once as the installed
console script."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_paimon.cli import build_parser, main, parse_time, render_table

from .cli_helpers import run
from .format.upkeep_helpers import make_table, tree_digest, upsert

FUTURE = "2100-01-01"


@pytest.fixture
def wh(tmp_path, monkeypatch):
    t = make_table(tmp_path)
    upsert(t, range(5), 1)
    upsert(t, range(3, 8), 2)
    upsert(t, [1], 3)
    t.maintenance.compact()
    monkeypatch.setenv("PAIMON_WAREHOUSE", str(tmp_path))
    return tmp_path, t


def test_snapshots_table_and_json(wh, capsys):
    code, out, err = run(capsys, "snapshots", "db.t")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["snapshot_id", "schema_id", "commit_kind", "commit_time"]
    assert set(lines[1]) <= {"-", " "}
    assert len(lines) == 2 + 4 and "COMPACT" in lines[-1]
    code, out, _ = run(capsys, "snapshots", "db.t", "--json")
    doc = json.loads(out)
    assert [d["snapshot_id"] for d in doc] == [1, 2, 3, 4] and doc[0]["commit_time"].endswith("Z")


def test_tag_lifecycle(wh, capsys):
    tmp, t = wh
    code, out, _ = run(capsys, "tag", "create", "db.t", "nightly", "--snapshot", "2", "--retain", "7d")
    assert code == 0 and "created tag 'nightly' on snapshot 2" in out
    code, out, _ = run(capsys, "tag", "create", "db.t", "nightly", "--snapshot", "2")
    assert code == 0 and "nothing changed" in out
    s3 = t.snapshot(3).time_millis
    as_of = dt.datetime.fromtimestamp(s3 / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    code, out, _ = run(capsys, "tag", "create", "db.t", "at3", "--as-of", as_of)
    assert code == 0 and "on snapshot 3" in out
    code, out, _ = run(capsys, "tags", "db.t", "--json")
    doc = json.loads(out)
    assert [(d["tag_name"], d["snapshot_id"]) for d in doc] == [("nightly", 2), ("at3", 3)]
    assert doc[0]["time_retained"] == "PT168H" and doc[0]["expires"]
    code, out, _ = run(capsys, "tags", "db.t")
    assert out.splitlines()[0].split()[:2] == ["tag_name", "snapshot_id"]
    code, out, _ = run(capsys, "tag", "rename", "db.t", "at3", "three")
    assert code == 0 and t.tags.names() and "three" in t.tags.names()
    code, out, _ = run(capsys, "tag", "delete", "db.t", "three", "--json")
    assert code == 0 and json.loads(out)["tags"] == ["three"]


def test_files(wh, capsys):
    tmp, t = wh
    code, out, _ = run(capsys, "files", "db.t")
    assert code == 0 and "bucket-" in out and "level" in out.splitlines()[0]
    t.tags.create("two", snapshot_id=2)
    code, out, _ = run(capsys, "files", "db.t", "--tag", "two", "--json")
    doc = json.loads(out)
    assert doc and all(d["level"] == 0 for d in doc)
    code, out, _ = run(capsys, "files", "db.t", "--snapshot", "1", "--json")
    assert sum(d["record_count"] for d in json.loads(out)) == 5


def test_expire_snapshots_dry_run_then_real(wh, capsys):
    tmp, t = wh
    before = tree_digest(t.path)
    code, out, _ = run(capsys, "expire-snapshots", "db.t", "--retain-min", "1", "--older-than", FUTURE,
                       "--max-deletes", "100", "--dry-run")
    assert code == 0 and "would delete 3 snapshot(s) 1..3" in out and "snapshot-1" in out
    assert tree_digest(t.path) == before
    code, out, _ = run(capsys, "expire-snapshots", "db.t", "--retain-min", "1", "--older-than", FUTURE,
                       "--max-deletes", "100", "--json")
    assert code == 0 and json.loads(out)["snapshots"] == [1, 2, 3]


def test_expire_snapshots_older_than_an_age_as_the_operator_takes_it(wh, capsys):
    tmp, t = wh
    code, out, err = run(capsys, "expire-snapshots", "db.t", "--retain-min", "1", "--older-than", "0 s",
                         "--max-deletes", "2", "--dry-run")
    assert code == 0 and "would delete 2 snapshot(s) 1..2" in out, err
    code, out, err = run(capsys, "expire-snapshots", "db.t", "--retain-min", "1", "--older-than", "30 d",
                         "--dry-run")
    assert code == 0 and "snapshot(s)" not in out, out


def test_expire_tags(wh, capsys):
    tmp, t = wh
    t.tags.create("2026-11-01", snapshot_id=1)
    t.tags.create("2026-11-02", snapshot_id=2)
    from airflow_paimon.format.tags import Tag
    old = t.tags.get("2026-11-01")
    open(t.tags.path(old.name), "w").write(
        Tag(old.name, old.snapshot, dt.datetime.now() - dt.timedelta(days=2), dt.timedelta(days=1)).to_json())
    code, out, _ = run(capsys, "expire-tags", "db.t", "--dry-run")
    assert code == 0 and "would delete" in out and "2026-11-01: retention" in out
    code, out, _ = run(capsys, "expire-tags", "db.t", "--json")
    assert json.loads(out)["tags"] == ["2026-11-01"]


def test_rollback(wh, capsys):
    tmp, t = wh
    t.tags.create("v2", snapshot_id=2)
    code, out, _ = run(capsys, "rollback", "db.t", "--tag", "v2", "--dry-run")
    assert code == 0 and "would delete 2 snapshot(s) 3..4" in out
    code, out, _ = run(capsys, "rollback", "db.t", "--snapshot", "3")
    assert code == 0 and "latest snapshot is now 3" in out
    s1 = t.snapshot(1).time_millis
    when = dt.datetime.fromtimestamp((s1 + 1) / 1000, dt.timezone.utc).isoformat()
    code, out, err = run(capsys, "rollback", "db.t", "--time", when, "--json")
    assert code == 0 and json.loads(out)["rolled_back_to"] == 1, err


def test_rollback_to_a_date_named_tag_never_becomes_a_time(wh, capsys):
    """A periodic tag's name reads as a date: once the tag is gone, --tag fails instead of rolling back to
    that date, and the old --to says which flag to use."""
    tmp, t = wh
    t.tags.create("2026-10-25", snapshot_id=3)
    code, out, _ = run(capsys, "rollback", "db.t", "--tag", "2026-10-25", "--dry-run")
    assert code == 0 and "would delete 1 snapshot(s) 4" in out
    t.maintenance.delete_tag("2026-10-25")
    before = tree_digest(tmp)
    code, out, err = run(capsys, "rollback", "db.t", "--tag", "2026-10-25")
    assert code == 1 and "tag '2026-10-25' does not exist on db.t" in err and err.count("\n") == 1
    code, out, err = run(capsys, "rollback", "db.t", "--to", "2026-10-25")
    assert code == 1 and "--to is gone" in err and "--tag 2026-10-25 or --time 2026-10-25" in err
    code, out, err = run(capsys, "rollback", "db.t", "--time", "2999-01-01")
    assert code == 1 and "in the future" in err
    assert tree_digest(tmp) == before


def test_rollback_and_read_after_expiry_name_the_closest_tag(wh, capsys):
    tmp, t = wh
    t.tags.create("two", snapshot_id=2)
    t.maintenance.expire_snapshots(retain_min=1, older_than=FUTURE, max_deletes=100)
    assert t.snapshot_manager.ids() == [4]
    when = dt.datetime.fromtimestamp(t.tags.get("two").snapshot.time_millis / 1000, dt.timezone.utc)
    when_text = (when + dt.timedelta(microseconds=500)).isoformat()
    before = tree_digest(tmp)
    code, out, err = run(capsys, "rollback", "db.t", "--time", when_text)
    assert code == 1 and "closest tag is 'two'" in err and "retained snapshots 4..4" in err
    code, out, err = run(capsys, "read", "db.t", "--as-of", when_text)
    assert code == 1 and "closest tag is 'two'" in err and "--closest-tag" in err
    assert tree_digest(tmp) == before
    code, out, err = run(capsys, "read", "db.t", "--as-of", when_text, "--closest-tag", "--format", "json")
    assert code == 0 and "tag 'two' (snapshot 2)" in err and "closest tag" in err
    assert sorted(r["id"] for r in json.loads(out)) == list(range(8))


def test_remove_orphan_files(wh, capsys):
    tmp, t = wh
    orphan = Path(t.path) / "bucket-0" / "data-deadbeef-0000-0000-0000-000000000000-0.parquet"
    orphan.write_bytes(b"x")
    code, out, _ = run(capsys, "remove-orphan-files", "db.t")
    assert code == 0 and "deleted 0 orphan" in out and orphan.exists()
    code, out, _ = run(capsys, "remove-orphan-files", "db.t", "--older-than", FUTURE, "--dry-run")
    assert "would delete 1 orphan" in out and str(orphan) in out and orphan.exists()
    code, out, _ = run(capsys, "remove-orphan-files", "db.t", "--older-than", FUTURE, "--json")
    assert json.loads(out)["files_freed"] == 1 and not orphan.exists()


def test_read_formats(wh, capsys, tmp_path):
    tmp, t = wh
    t.tags.create("one", snapshot_id=1)
    code, out, _ = run(capsys, "read", "db.t", "--tag", "one")
    assert code == 0 and out.splitlines()[0].split() == ["id", "p", "v"] and len(out.splitlines()) == 2 + 5
    code, out, _ = run(capsys, "read", "db.t", "--format", "csv", "--limit", "2")
    assert out.splitlines()[0] == '"id","p","v"' and len(out.splitlines()) == 3
    code, out, _ = run(capsys, "read", "db.t", "--snapshot", "1", "--format", "json", "--columns", "id")
    assert sorted(r["id"] for r in json.loads(out)) == [0, 1, 2, 3, 4]
    target = tmp_path / "out.parquet"
    code, out, err = run(capsys, "read", "db.t", "--format", "parquet", "--output", str(target))
    assert code == 0 and pq.read_table(target).num_rows == 8 and "wrote 8 row(s)" in err
    s2 = t.snapshot(2).time_millis
    when = dt.datetime.fromtimestamp(s2 / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    code, out, _ = run(capsys, "read", "db.t", "--as-of", when, "--format", "json")
    assert len(json.loads(out)) == 8


@pytest.mark.parametrize("argv, needle", [
    (["tag", "create", "db.t", "123"], "purely numeric"),
    (["tag", "create", "db.t", "a/b"], "must not contain"),
    (["tag", "create", "db.t", "x", "--snapshot", "99"], "snapshot 99"),
    (["tag", "create", "db.t", "x", "--as-of", "yesterday"], "--as-of: 'yesterday' is not a point in time"),
    (["tag", "create", "db.t", "x", "--retain", "forever"], "--retain: expected a duration such as '7d'"),
    (["tag", "delete", "db.t", "nope"], "tag 'nope' does not exist"),
    (["tag", "rename", "db.t", "nope", "other"], "does not exist"),
    (["expire-snapshots", "db.t", "--retain-min", "0"], "retain_min: must be at least 1"),
    (["expire-snapshots", "db.t", "--older-than", "7 dayz"], "--older-than: expected a duration such as '7d'"),
    (["remove-orphan-files", "db.t", "--older-than", "soon"], "--older-than: expected a duration such as '7d'"),
    (["expire-snapshots", "db.t", "--retain-min", "5", "--retain-max", "2"], "retain_max"),
    (["rollback", "db.t", "--snapshot", "99"], "snapshot 99"),
    (["rollback", "db.t", "--tag", "no-such-tag"], "tag 'no-such-tag' does not exist on db.t"),
    (["rollback", "db.t", "--time", "nope"], "--time: 'nope' is not a point in time"),
    (["rollback", "db.t", "--time", "2001-01-01"], "its first commit (snapshot 1) was at"),
    (["rollback", "db.t"], "give exactly one of --tag NAME, --snapshot N and --time TIME"),
    (["rollback", "db.t", "--tag", "v", "--snapshot", "1"], "give exactly one"),
    (["rollback", "db.t", "--tag", "x" * 300], "does not exist on db.t"),
    (["tag", "delete", "db.t", "x" * 300], "does not exist on db.t"),
    (["read", "db.t", "--tag", "x" * 300], "does not exist on db.t"),
    (["read", "db.t", "--closest-tag"], "--closest-tag applies to --as-of only"),
    (["read", "db.t", "--as-of", "2001-01-01"], "its first commit (snapshot 1) was at"),
    (["read", "db.t", "--tag", "nope"], "tag 'nope' does not exist"),
    (["read", "db.t", "--format", "parquet"], "needs --output"),
    (["read", "db.t", "--columns", "zz"], "not in the table schema"),
    (["snapshots", "db.nope"], "does not exist"),
    (["snapshots", "not-an-identifier"], "database.table"),
])
def test_errors_are_one_line_and_change_nothing(wh, capsys, argv, needle):
    tmp, t = wh
    before = tree_digest(tmp)
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("airflow-paimon: error: ") and needle in err
    assert "Traceback" not in err
    assert tree_digest(tmp) == before


def test_damaged_and_missing_files_are_named_on_one_line(wh, capsys):
    tmp, t = wh
    t.tags.create("one", snapshot_id=1)
    Path(f"{t.path}/tag/tag-one").write_text("{")
    code, out, err = run(capsys, "tags", "db.t")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"airflow-paimon: error: tag file {t.path}/tag/tag-one is not valid Paimon JSON (")
    os.remove(f"{t.path}/tag/tag-one")
    Path(f"{t.path}/snapshot/snapshot-4").write_text("")
    code, out, err = run(capsys, "read", "db.t")
    assert code == 1 and err.count("\n") == 1
    assert f"snapshot file {t.path}/snapshot/snapshot-4 is not valid Paimon JSON (empty)" in err


def test_usage_errors_exit_2_with_one_line(wh, capsys):
    with pytest.raises(SystemExit) as e:
        main(["tag"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err
    with pytest.raises(SystemExit):
        main(["expire-snapshots", "db.t", "--retain-min", "many"])
    assert capsys.readouterr().err.count("\n") == 1


def test_missing_warehouse(monkeypatch, capsys):
    monkeypatch.delenv("PAIMON_WAREHOUSE", raising=False)
    code, out, err = run(capsys, "snapshots", "db.t")
    assert code == 1 and "PAIMON_WAREHOUSE" in err


def _all_parsers(parser):
    yield parser
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def test_every_command_has_help_with_an_example():
    parsers = list(_all_parsers(build_parser()))
    assert len(parsers) >= 13
    for p in parsers:
        text = p.format_help()
        assert "example:" in text and "airflow-paimon" in text, p.prog


def test_parse_time_and_render():
    assert parse_time("2026-11-20") == int(dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc).timestamp() * 1000)
    assert parse_time("2026-11-20 02:00:00") == parse_time("2026-11-20T02:00:00Z")
    assert parse_time("2026-11-20T03:00:00+01:00") == parse_time("2026-11-20 02:00")
    text = render_table(["a", "bb"], [[1, "x"], [100, None]])
    assert text.splitlines() == ["  a  bb", "---  --", "  1  x", "100"]


@pytest.mark.subprocess
def test_console_script_in_a_subprocess(wh):
    tmp, t = wh
    script = Path(sys.executable).parent / "airflow-paimon"
    assert script.exists(), "the package is not installed with its console script"
    env = dict(os.environ, PAIMON_WAREHOUSE=str(tmp))
    ok = subprocess.run([str(script), "snapshots", "db.t", "--json"], capture_output=True, text=True, env=env,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert [d["snapshot_id"] for d in json.loads(ok.stdout)] == [1, 2, 3, 4]
    bad = subprocess.run([str(script), "tag", "create", "db.t", "42"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    # that the CLI imports nothing from Airflow is checked in tests/format/test_imports.py's fresh interpreter


# ---------------------------------------------------------------------------------------------------------
# Object-store warehouses: --conn-id and --option, secrets never printed
# ---------------------------------------------------------------------------------------------------------

CLOSED_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


@pytest.mark.airflow
def test_conn_id_reads_the_airflow_connection(wh, capsys, monkeypatch):
    tmp, _ = wh
    monkeypatch.delenv("PAIMON_WAREHOUSE")
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "paimon", "extra": {"warehouse": str(tmp)}}))
    code, out, err = run(capsys, "snapshots", "db.t", "--conn-id", "lake", "--json")
    assert code == 0, err
    assert [d["snapshot_id"] for d in json.loads(out)] == [1, 2, 3, 4]
    code, _, err = run(capsys, "snapshots", "db.t", "--conn-id", "missing")
    assert code == 1 and err.count("\n") == 1
    assert "connection 'missing' is not defined" in err and "AIRFLOW_CONN_MISSING" in err


def test_options_reach_the_object_store_and_secrets_stay_hidden(capsys):
    code, out, err = run(capsys, "snapshots", "db.t", "--warehouse", "s3://bucket/wh",
                         "--option", f"s3.endpoint={CLOSED_ENDPOINT}", "--option", "s3.access-key=AKIDSECRET1",
                         "--option", "s3.secret-key=TOPSECRET99", "--option", "s3.path.style.access=true")
    assert code == 1 and err.count("\n") == 1
    assert "127.0.0.1:9" in err  # the endpoint option was used
    assert "AKIDSECRET1" not in err + out and "TOPSECRET99" not in err + out


@pytest.mark.airflow
def test_connection_keys_are_used_and_never_printed(capsys, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_STORE", json.dumps({
        "conn_type": "paimon", "login": "AKIDSECRET2", "password": "TOPSECRET88",
        "extra": {"warehouse": "s3://bucket/wh", "s3.endpoint": CLOSED_ENDPOINT}}))
    code, out, err = run(capsys, "tags", "db.t", "--conn-id", "store")
    assert code == 1 and "127.0.0.1:9" in err
    assert "AKIDSECRET2" not in err + out and "TOPSECRET88" not in err + out
    # --option overrides the connection's options
    code, _, err = run(capsys, "tags", "db.t", "--conn-id", "store", "--option", "s3.endpoint=http://127.0.0.1:7")
    assert code == 1 and "127.0.0.1:7" in err


def test_redaction_of_an_error_that_quotes_a_secret(wh, capsys):
    # The option value is echoed by nothing, even when an error message happens to contain it.
    code, _, err = run(capsys, "snapshots", "db.TOPSECRET77x", "--option", "s3.secret-key=TOPSECRET77x")
    assert code == 1 and "does not exist" in err and "TOPSECRET77x" not in err and "***" in err


def test_a_malformed_option_is_not_echoed(wh, capsys):
    with pytest.raises(SystemExit) as e:
        main(["snapshots", "db.t", "--option", "TOPSECRET66"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "KEY=VALUE" in err and "TOPSECRET66" not in err


def test_help_offers_conn_id_and_option_everywhere():
    for p in _all_parsers(build_parser()):
        if any(a.dest == "table" for a in p._actions):
            text = p.format_help()
            assert "--conn-id ID" in text and "--option KEY=VALUE" in text, p.prog
