"""`Access.may_see`: who sees an episode, from the owner recorded at allocation (no api-server needed).

A viewer's Access carries no known DAGs (the page reads them only for store-wide users), so the
rule must not depend on them for anyone else. The allocation key proves nothing (any DAG author
chooses it): an owner read from the key grants no DAG's viewers anything.
"""

from __future__ import annotations

import pytest

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import Owner
from airflow_idempotent_jobs.plugins.page_auth import Access
from airflow_idempotent_jobs.stores import open_store

VIEWER = Access(readable_dags=frozenset({"alpha"}), known_dags=frozenset(), store_wide=False)
ADMIN = Access(readable_dags=frozenset({"alpha", "beta"}), known_dags=frozenset({"alpha", "beta"}), store_wide=True)
#: Store-wide (Plugins view + Connections read) without read access to beta.
OPERATOR = Access(readable_dags=frozenset({"alpha"}), known_dags=frozenset({"alpha", "beta"}), store_wide=True)
RUN = "manual__2026-08-03T10:00:00+00:00"


def episode(key: str, owner: Owner | None, tmp_path_factory: pytest.TempPathFactory) -> Episode:
    with open_store(tmp_path_factory.mktemp("store")) as store:
        return store.allocate(WeekId.parse("2026-W32"), key, owner=owner)


@pytest.mark.parametrize(
    ("key", "owner", "viewer", "admin", "operator"),
    [
        (f"airflow:alpha:t:{RUN}", Owner("alpha", "t", RUN, None), True, True, True),
        (f"airflow:beta:t:{RUN}", Owner("beta", "t", RUN, None), False, True, False),  # known, not readable
        ("airflow:gone:t:manual__1", Owner("gone", "t", "manual__1", None), False, True, True),  # unknown DAG
        # The key names alpha, beta's task allocated it: beta's episode, not on alpha's page.
        (f"airflow:alpha:t:{RUN}", Owner("beta", "t", RUN, None), False, True, False),
        # The key names beta, alpha's task allocated it: alpha's viewers see it, beta's do not hide it.
        (f"airflow:beta:t:{RUN}", Owner("alpha", "t", RUN, None), True, True, True),
        # Allocated outside Airflow's operator: the key's DAG is unproven, so store-wide only.
        (f"airflow:alpha:t:{RUN}", None, False, True, True),
        ("airflow#alpha:t:manual__x#" + "0" * 64, None, False, True, True),
        (f"airflow:beta:t:{RUN}", None, False, True, True),
        ("legacy:weekly-media:job-17", None, False, True, True),  # no owner at all: store-wide only
    ],
)
def test_who_sees_an_episode(
    key: str,
    owner: Owner | None,
    viewer: bool,
    admin: bool,
    operator: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    found = episode(key, owner, tmp_path_factory)
    assert (VIEWER.may_see(found), ADMIN.may_see(found), OPERATOR.may_see(found)) == (viewer, admin, operator)
