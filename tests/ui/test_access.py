"""`Access.may_see`: who sees an episode, from its allocation key's DAG (no api-server needed).

A viewer's Access carries no known DAGs (the page reads them only for store-wide users), so the
rule must not depend on them for anyone else.
"""

from __future__ import annotations

import pytest

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.stores import open_store
from airflow_idempotent_jobs.ui.auth import Access

VIEWER = Access(readable_dags=frozenset({"alpha"}), known_dags=frozenset(), store_wide=False)
ADMIN = Access(readable_dags=frozenset({"alpha", "beta"}), known_dags=frozenset({"alpha", "beta"}), store_wide=True)
#: Store-wide (Plugins view + Connections read) without read access to beta.
OPERATOR = Access(readable_dags=frozenset({"alpha"}), known_dags=frozenset({"alpha", "beta"}), store_wide=True)


def episode(key: str, tmp_path_factory: pytest.TempPathFactory) -> Episode:
    with open_store(tmp_path_factory.mktemp("store")) as store:
        return store.allocate(WeekId.parse("2026-W32"), key)


@pytest.mark.parametrize(
    ("key", "viewer", "admin", "operator"),
    [
        ("airflow:alpha:t:manual__2026-08-03T10:00:00+00:00", True, True, True),
        ("airflow:beta:t:scheduled__2026-08-03T10:00:00+00:00", False, True, False),  # known, not readable
        ("airflow:gone:t:manual__1", False, True, True),  # a DAG Airflow does not know: store-wide only
        ("legacy:weekly-media:job-17", False, True, True),  # no owner: store-wide only
        ("airflow#alpha:t:manual__x#" + "0" * 64, True, True, True),  # a bounded key names dag and task
    ],
)
def test_who_sees_an_episode(
    key: str, viewer: bool, admin: bool, operator: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    found = episode(key, tmp_path_factory)
    assert (VIEWER.may_see(found), ADMIN.may_see(found), OPERATOR.may_see(found)) == (viewer, admin, operator)
