"""Commit users of the provider's operators -> the DAG and task that committed."""

from __future__ import annotations

from airflow_paimon.ui.runs import dag_id_candidates, split_commit_user


def test_the_longest_existing_dag_id_wins():
    user = "airflow:sales.daily.merge_group.merge"
    assert dag_id_candidates(user) == ["sales", "sales.daily", "sales.daily.merge_group"]
    assert split_commit_user(user, ["sales", "sales.daily"]) == ("sales.daily", "merge_group.merge")
    assert split_commit_user(user, ["sales.daily.merge_group"]) == ("sales.daily.merge_group", "merge")


def test_commits_not_made_by_an_operator_have_no_run():
    assert split_commit_user("spark-writer-1", ["spark"]) is None
    assert dag_id_candidates("4f7c-commit-user") == []
    assert split_commit_user("airflow:unknown.task", ["other"]) is None
