"""Two processes run the paid step for one episode at the same moment: one submission."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.paid import idempotency_token
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import CAPABILITIES, CHILD_IN_PROGRESS, CHILD_OK, finish, jobs_for, start_child


@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_two_processes_at_once_submit_once(tmp_path: Path, capability: str) -> None:
    store_path = tmp_path / "store"
    store = open_store(store_path)
    eid = store.allocate("2026-W32", "together").episode_id
    token = idempotency_token(store.namespace, eid)
    barrier = tmp_path / "go"
    # A slow answer keeps the first submitter in flight while the second one decides.
    with ProviderServer(
        polls_to_finish=1, fault="slow", fault_times=-1, slow_seconds=1.0, **CAPABILITIES[capability]
    ) as server:
        children = [start_child(server, store_path, eid, barrier=str(barrier)) for _ in range(2)]
        barrier.touch()
        results = [finish(child) for child in children]
        codes = sorted(code for code, _, _ in results)
        assert codes in ([CHILD_OK, CHILD_OK], [CHILD_OK, CHILD_IN_PROGRESS]), [err for _, _, err in results]
        (job,) = jobs_for(server, token)
        assert server.accepted() == 1
        assert all(out["remote_ref"] == job for code, out, _ in results if code == CHILD_OK)
        assert store.get(eid).submission.remote_ref == job
