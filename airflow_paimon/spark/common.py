"""What the Spark applications share: arguments, the session, identifiers, results, and shipping the package.

No Airflow imports, and importable without pyspark (the operators use `application_path` and `py_files_zip`
in the Airflow worker).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Mapping

RESULT_PREFIX = "AIRFLOW_PAIMON_RESULT "
OPTIONS_ENV = "AIRFLOW_PAIMON_CATALOG_OPTIONS"
# The exit code of an application whose input is wrong (sysexits' EX_DATAERR); 1 stays a crash.
INPUT_ERROR_EXIT = 65
SPARK_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = SPARK_DIR.parent


def stable_int64(*parts: Any) -> int:
    """A positive int64 from `parts`, equal on every machine and Python run (a commit identifier)."""
    text = "\x1f".join(str(p) for p in parts)
    value = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")
    # Below Long.MAX_VALUE: that value is Paimon's identifier of batch commits that carry none.
    return value % (2**63 - 1)


def reapply_identifier(identifier: int, token: Any) -> int:
    """The identifier of a deliberate re-run of commit `identifier` (distinct per `token`)."""
    return stable_int64("reapply", identifier, token)


def application_path(name: str) -> str:
    """The file path of one of the bundled applications ("merge_app", "compact_app", "orphans_app",
    "export_app")."""
    path = SPARK_DIR / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(f"no bundled Spark application {name!r} at {path}")
    return str(path)


def _package_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root.parent).as_posix()
        h.update(rel.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def py_files_zip(directory: str | None = None) -> str:
    """A zip of the installed ``airflow_paimon`` package for ``spark-submit --py-files``.

    Built once per package content into `directory` (default: the system temp dir) and reused; the zip holds
    the Python sources only (``airflow_paimon/...``), so executors import the same code as the driver.
    Executors still need pyarrow, numpy and fastavro in their own Python.
    """
    digest = _package_digest(PACKAGE_DIR)
    out_dir = Path(directory or tempfile.gettempdir())
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"airflow_paimon-{digest}.zip"
    if target.exists():
        return str(target)
    tmp = out_dir / f".{target.name}.{os.getpid()}.tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            z.write(path, path.relative_to(PACKAGE_DIR.parent).as_posix())
    os.replace(tmp, target)
    return str(target)


# ---- inside the applications ------------------------------------------------------------------------

def strip_script_dir() -> None:
    """Drop this directory from sys.path: spark-submit runs an app as a script, which would put the app's
    own folder first and let its module names shadow top-level ones."""
    here = str(SPARK_DIR)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


def _spec_parser(flags: Mapping[str, dict[str, Any]]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spec", help="the whole job as one JSON object")
    parser.add_argument("--spec-file", help="a file holding the job as one JSON object")
    for name, kwargs in flags.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, **kwargs)
    return parser


def _assemble_spec(args: argparse.Namespace, flags: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if args.spec_file:
        spec.update(json.loads(Path(args.spec_file).read_text()))
    if args.spec:
        spec.update(json.loads(args.spec))
    for name in flags:
        value = getattr(args, name)
        if value is not None:
            spec[name] = value
    env_options = os.environ.get(OPTIONS_ENV)
    if env_options:
        options = dict(json.loads(env_options))
        options.update(spec.get("options") or {})
        spec["options"] = options
    return spec


def load_spec(argv: list[str] | None, flags: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The job spec from ``--spec JSON`` / ``--spec-file PATH`` and/or individual flags (flags win).

    Filesystem options may also come from the environment variable AIRFLOW_PAIMON_CATALOG_OPTIONS (JSON), which
    keeps secrets off the command line.
    """
    return _assemble_spec(_spec_parser(flags).parse_args(argv), flags)


def _filesystem_options(argv: list[str]) -> dict[str, str]:
    """The job's filesystem options (to write a result file on the warehouse's store), whatever else argv holds."""
    flags = {"options": {"type": json_arg}}
    known, _ = _spec_parser(flags).parse_known_args(argv)
    try:
        return dict(_assemble_spec(known, flags).get("options") or {})
    except (OSError, ValueError, TypeError):  # a spec that does not load: main() reports it
        return {}


def json_arg(value: Any) -> Any:
    """A flag value that may be JSON (lists, objects, numbers) or a plain string."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text[:1] in "[{\"" or text in ("true", "false", "null"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return value


# Defaults of the applications' sessions (a --conf of the same key wins). Increment-sized shuffles are coalesced
# by size, not spread over every core: a small increment is then written by one task, in one Python worker,
# instead of paying for starting a Python worker (and importing pyarrow) per core.
APP_SQL_DEFAULTS = {"spark.sql.adaptive.coalescePartitions.parallelismFirst": "false"}


def spark_session(app_name: str) -> Any:
    """The application's session (master and resources come from spark-submit); UTC session time zone."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    spark = builder.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    given = spark.sparkContext.getConf()
    for key, value in APP_SQL_DEFAULTS.items():
        if not given.contains(key):
            spark.conf.set(key, value)
    try:
        spark.sparkContext.setLogLevel(os.environ.get("AIRFLOW_PAIMON_SPARK_LOG_LEVEL", "WARN"))
    except Exception:  # pragma: no cover - Spark Connect has no SparkContext
        pass
    return spark


def print_result(result: Mapping[str, Any]) -> None:
    """One line the operator (or a person) can find in the spark-submit output."""
    print(RESULT_PREFIX + json.dumps(result, default=str, sort_keys=True), flush=True)


def parse_result(lines: Any) -> dict[str, Any] | None:
    """The last result line printed by `print_result` among `lines`, or None."""
    found = None
    for line in lines:
        text = str(line)
        idx = text.find(RESULT_PREFIX)
        if idx >= 0:
            try:
                found = json.loads(text[idx + len(RESULT_PREFIX):])
            except json.JSONDecodeError:
                continue
    return found


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str | os.PathLike[str]) -> Path:
    text = str(path)
    return Path(text[len("file://"):] if text.startswith("file://") else text)


def read_result_file(path: str | os.PathLike[str], options: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The result an application wrote to ``--result-file`` (None when it wrote none: it never got that far).

    `path` is a local path, or a URI on the warehouse's store (read with its filesystem `options`)."""
    text: str | None
    if _is_uri(str(path)):
        from airflow_paimon.format.fileio import FileIO

        io = FileIO(str(path), options)
        text = io.read_text(str(path)) if io.exists(str(path)) else None
    else:
        try:
            text = _local(path).read_text()
        except FileNotFoundError:
            text = None
    if text is None:
        return None
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) else None


def remove_result_file(path: str, options: Mapping[str, str] | None = None) -> None:
    """Delete a result file (absent is fine): before a submission, so that a retry never reads an older
    attempt's result, and after reading it."""
    if _is_uri(path):
        from airflow_paimon.format.fileio import FileIO

        FileIO(path, options).delete(path)
    else:
        _local(path).unlink(missing_ok=True)


def _write_result_file(path: str | None, result: Mapping[str, Any], options: Mapping[str, str]) -> None:
    if not path:
        return
    text = json.dumps(result, default=str, sort_keys=True)
    if _is_uri(path):
        from airflow_paimon.format.fileio import FileIO

        FileIO(path, options).write_bytes(path, text.encode("utf-8"))
        return
    target = _local(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{target}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    os.replace(tmp, target)


def _input_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that say the job's input is wrong: running it again cannot succeed."""
    from airflow_paimon.format.errors import PaimonError
    from airflow_paimon.merge import MergeClauseError

    errors: tuple[type[BaseException], ...] = (PaimonError, MergeClauseError, ValueError)
    try:  # Spark's own verdict on the source: a missing path or column, a query or clause that does not parse
        from pyspark.errors import AnalysisException
    except ImportError:  # pragma: no cover - the applications always run with pyspark
        return errors
    return errors + (AnalysisException,)


def _one_line(error: BaseException) -> str:
    """`error` as one line: Spark's analysis errors keep their first line (the plan that follows is noise)."""
    text = str(error).strip()
    if not isinstance(error, ValueError) and not type(error).__module__.startswith("airflow_paimon"):
        text = text.splitlines()[0] if text else text
    return f"{type(error).__name__}: {' '.join(text.split())}"


def run_app(main: Any, argv: list[str] | None = None) -> int:
    """Run `main(argv)`, which returns the job's result; print it (and write it to ``--result-file PATH``: a
    local path when the driver runs beside the operator, else a URI on the warehouse's store, written with the
    job's own filesystem options).

    A bad input (see `_input_errors`; a commit conflict is not one: a retry may succeed) becomes a one-line
    ``ERROR`` on stderr, a ``failed`` result and exit code INPUT_ERROR_EXIT, so that the operator can tell it
    from a crash (exit 1) or a killed JVM and fail the task without retries.
    """
    from airflow_paimon.format.errors import CommitConflictError

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--result-file")
    known, rest = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    try:
        result = main(rest)
    except CommitConflictError:
        raise
    except _input_errors() as e:
        message = _one_line(e)
        print(f"ERROR {message}", file=sys.stderr, flush=True)
        failed = {"status": "failed", "error": message}
        print_result(failed)
        _write_result_file(known.result_file, failed, _filesystem_options(rest))
        return INPUT_ERROR_EXIT
    print_result(result)
    _write_result_file(known.result_file, result, _filesystem_options(rest))
    return 0
