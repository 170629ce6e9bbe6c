"""The crash matrix: SIGKILL a real process at each point of a submission, retry in a fresh one.

For every provider capability the server must hold at most one job per episode; (a) and (b) end
with the original job, (c) refuses until ``idempotent-jobs reconcile`` settles it.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.paid import idempotency_token
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import (
    CAPABILITIES,
    CHILD_OK,
    CHILD_UNKNOWN,
    finish,
    jobs_for,
    run_child,
    run_cli,
    start_child,
    wait_until,
)

#: Where the first process dies; ``in_flight`` is killed from outside once the server has accepted.
POINTS = ["before_intent", "after_intent", "in_flight", "after_answer", "after_saved"]
#: Points after which the provider certainly holds the job.
ACCEPTED_POINTS = {"in_flight", "after_answer", "after_saved"}
#: What the crashed process left in the ledger.
LEFT_BEHIND = {
    "before_intent": SubmissionState.NONE,
    "after_intent": SubmissionState.SUBMITTING,
    "in_flight": SubmissionState.SUBMITTING,
    "after_answer": SubmissionState.SUBMITTING,
    "after_saved": SubmissionState.ACCEPTED,
}


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_crash_then_retry_never_pays_twice(tmp_path: Path, capability: str, point: str) -> None:
    store_path = tmp_path / "store"
    store = open_store(store_path)
    episode = store.allocate("2026-W32", f"crash:{capability}:{point}")
    eid = episode.episode_id
    token = idempotency_token(store.namespace, eid)
    with ProviderServer(polls_to_finish=1, **CAPABILITIES[capability]) as server:
        # -- the crash ---------------------------------------------------------------------
        if point == "in_flight":
            server.configure(fault="slow", fault_times=1, slow_seconds=30)
            first = start_child(server, store_path, eid)
            wait_until(lambda: server.accepted(token) == 1, what="the server to accept the job")
            first.send_signal(signal.SIGKILL)  # the answer is still held by the server
        else:
            first = start_child(server, store_path, eid, kill=point)
        code, _, err = finish(first)
        assert code == -signal.SIGKILL, err
        assert server.accepted(token) == (1 if point in ACCEPTED_POINTS else 0)
        original = jobs_for(server, token)
        left = store.get(eid).submission
        assert left.state is LEFT_BEHIND[point]
        if point == "after_saved":
            assert [left.remote_ref] == original

        # -- the retry, in a fresh process --------------------------------------------------
        code, out, err = run_child(server, store_path, eid, poll=True)
        uncertain = capability == "c-neither" and point in ("after_intent", "in_flight", "after_answer")
        if uncertain:
            assert code == CHILD_UNKNOWN, err
            assert "idempotent-jobs reconcile" in out["message"]
            assert server.accepted(token) == len(original)  # nothing new was sent...
            assert store.get(eid).submission.state is LEFT_BEHIND[point]  # ...and nothing changed
            code, out, err = run_child(server, store_path, eid, poll=True)
            assert code == CHILD_UNKNOWN, "still refused until an operator settles it"
            # -- the operator settles it; the retry resumes (or submits exactly once) ---------
            word = ["--remote-ref", original[0]] if original else ["--not-submitted"]
            done = run_cli("--store", str(store_path), "reconcile", eid, *word, "--by", "oncall")
            assert done.returncode == 0, done.stderr
            settled = store.get(eid).submission
            assert settled.settled_by == "oncall" and settled.settled_at
            code, out, err = run_child(server, store_path, eid, poll=True)
        assert code == CHILD_OK, err
        assert out["state"] == "succeeded"
        assert out["cost"] == 2.5
        final = jobs_for(server, token)
        assert len(final) == 1, f"the provider holds {final} for one episode"
        if original:
            assert out["remote_ref"] == original[0], "the retry must end on the original job"
        assert out["remote_ref"] == final[0]
        assert server.accepted() == 1
