"""The crash matrix for `OpenAIBatchProvider`: a real SIGKILL at each point of a submission, a retry in a fresh process.

Every cell must end with exactly one billed batch for the episode (the double's per-token counter),
the original one when the first process got that far, settled by the retry alone: the adapter's
lookup by listing (capability (b)) finds the batch the dead process created, or proves there is
none. Killed between the free upload and the paid call, only the upload repeats.
"""

from __future__ import annotations

import json
import multiprocessing.context
import os
import signal
from pathlib import Path

import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.paid import idempotency_token
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from tests.paid.support import wait_until
from tests.vendors.openai._child import REQUEST
from tests.vendors.openai.conftest import start_step
from tests.vendors.openai.support import expected_cost

POINTS = ["before_intent", "after_intent", "between_calls", "in_flight", "after_answer", "after_saved"]
LEFT_BEHIND = {
    "before_intent": SubmissionState.NONE,
    "after_intent": SubmissionState.SUBMITTING,
    "between_calls": SubmissionState.SUBMITTING,
    "in_flight": SubmissionState.SUBMITTING,
    "after_answer": SubmissionState.SUBMITTING,
    "after_saved": SubmissionState.ACCEPTED,
}
ACCEPTED_POINTS = {"in_flight", "after_answer", "after_saved"}


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_then_a_retry_bills_one_batch(
    forkserver: multiprocessing.context.ForkServerContext, api: OpenAIApi, tmp_path: Path, point: str
) -> None:
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", f"crash:{point}").episode_id
    token = idempotency_token(store.identity, eid)
    spec = {"store": str(tmp_path / "store"), "episode": eid, "api_key": api.api_key, "base_url": api.base_url}

    if point == "in_flight":
        api.configure(fault="hang_after_accept", fault_times=1, slow_seconds=30)
        first = start_step(forkserver, spec, tmp_path / "first.json")
        wait_until(lambda: api.accepted(token) == 1, what="the API to create the batch")
        assert first.pid is not None
        os.kill(first.pid, signal.SIGKILL)  # the answer is still held by the API
    else:
        first = start_step(forkserver, {**spec, "kill": point}, tmp_path / "first.json")
    first.join(30)
    assert first.exitcode == -signal.SIGKILL
    assert api.accepted(token) == (1 if point in ACCEPTED_POINTS else 0)
    original = api.batches_for(token)
    left = store.get(eid).submission
    assert left.state is LEFT_BEHIND[point]
    if point == "after_saved":
        assert [left.remote_ref] == original

    retry = start_step(forkserver, {**spec, "poll": True}, tmp_path / "retry.json")
    retry.join(30)
    out = json.loads((tmp_path / "retry.json").read_text())
    assert retry.exitcode == 0, out
    assert out["state"] == "succeeded"
    assert out["cost"] == pytest.approx(expected_cost([r["body"] for r in REQUEST["requests"]]))
    final = api.batches_for(token)
    assert len(final) == 1, f"the API holds {final} for one episode"
    assert out["remote_ref"] == final[0] and (not original or original == final)
    assert api.accepted() == 1
    assert api.stats()["uploads"] == (2 if point == "between_calls" else 1)  # only the free upload repeats
