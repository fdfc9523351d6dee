"""Which DAG run made a snapshot: the commit user and commit identifier the provider's operators write.

The operators commit as ``airflow:<dag_id>.<task_id>`` with an identifier derived from the task and its run
(``operators.spark_submit.commit_identifier_of``: the purpose, the dag and task ids, the map index and the run's
data interval, or its run id). The identifier is a hash, so the run is found by computing it for the DAG's
recent runs and comparing. A commit made by anything else (another engine, a notebook) has no run; a commit the
hash does not match (a re-applied merge, a mapped task) still links to the DAG's list of runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["COMMIT_USER_PREFIX", "RunLink", "RunResolver", "split_commit_user"]

COMMIT_USER_PREFIX = "airflow:"
# What the operators commit for: merges and compactions (see operators/merge.py and operators/maintenance.py).
_PURPOSES = ("merge", "compact")
_RECENT_RUNS = 1000


@dataclass(frozen=True)
class RunLink:
    """Where the UI shows the run (or, when the run is not known, the DAG's runs)."""

    dag_id: str
    task_id: str
    run_id: str | None
    href: str


def split_commit_user(commit_user: str, dag_ids: Iterable[str]) -> tuple[str, str] | None:
    """(dag id, task id) of an operator's commit user, given the DAG ids that exist (ids may hold dots, so the
    longest existing DAG id that prefixes the rest wins)."""
    if not commit_user.startswith(COMMIT_USER_PREFIX):
        return None
    rest = commit_user[len(COMMIT_USER_PREFIX):]
    known = set(dag_ids)
    cuts = [i for i, ch in enumerate(rest) if ch == "."]
    for cut in reversed(cuts):
        if rest[:cut] in known and rest[cut + 1:]:
            return rest[:cut], rest[cut + 1:]
    return None


def dag_id_candidates(commit_user: str) -> list[str]:
    """Every prefix of the commit user's rest that could be a DAG id."""
    if not commit_user.startswith(COMMIT_USER_PREFIX):
        return []
    rest = commit_user[len(COMMIT_USER_PREFIX):]
    return [rest[:i] for i, ch in enumerate(rest) if ch == "."]


class RunResolver:
    """Finds the runs of commits in Airflow's metadata database, one query per DAG, cached for one page."""

    def __init__(self, base_url: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self._dag_ids: dict[str, tuple[str, str] | None] = {}
        self._identifiers: dict[tuple[str, str], dict[int, str]] = {}

    def link(self, commit_user: str, commit_identifier: int) -> RunLink | None:
        owner = self._owner(commit_user)
        if owner is None:
            return None
        dag_id, task_id = owner
        run_id = self._runs(dag_id, task_id).get(commit_identifier)
        dag_path = f"{self.base_url}/dags/{quote(dag_id, safe='')}"
        href = f"{dag_path}/runs/{quote(run_id, safe='')}" if run_id else f"{dag_path}/runs"
        return RunLink(dag_id=dag_id, task_id=task_id, run_id=run_id, href=href)

    def _owner(self, commit_user: str) -> tuple[str, str] | None:
        if commit_user not in self._dag_ids:
            candidates = dag_id_candidates(commit_user)
            self._dag_ids[commit_user] = split_commit_user(commit_user, _existing_dag_ids(candidates)) \
                if candidates else None
        return self._dag_ids[commit_user]

    def _runs(self, dag_id: str, task_id: str) -> dict[int, str]:
        key = (dag_id, task_id)
        if key not in self._identifiers:
            from airflow_paimon.operators.spark_submit import commit_identifier_of

            found: dict[int, str] = {}
            for run_id, start, end in _recent_runs(dag_id):
                for purpose in _PURPOSES:
                    found[commit_identifier_of(purpose, dag_id, task_id, -1, start, end, run_id)] = run_id
            self._identifiers[key] = found
        return self._identifiers[key]


def _existing_dag_ids(candidates: list[str]) -> list[str]:
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return list(session.scalars(select(DagModel.dag_id).where(DagModel.dag_id.in_(candidates))))


def _recent_runs(dag_id: str) -> list[tuple[str, object, object]]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(DagRun.run_id, DagRun.data_interval_start, DagRun.data_interval_end)
            .where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(_RECENT_RUNS))
        return [(str(r[0]), r[1], r[2]) for r in rows]
