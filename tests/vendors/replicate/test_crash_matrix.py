"""The crash matrix for `ReplicatePredictionProvider`: SIGKILL a real process at each point, retry in a fresh one.

Each cell (a fresh store and episode; one API for the module): the first process dies at its point
(``in_flight`` is killed from outside while the API holds back the create answer of a prediction it
already made); a fresh process then retries (the lookup finds the token in the prediction's input,
or proves that no prediction carries it) and polls to the end. The API must hold at most one
prediction for the episode's token, the retry must end on the original one when there is one, and
the recorded cost must be its predict time at the table's price, computed here.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.paid import idempotency_token
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi
from tests.vendors.forked_steps import ACCEPTED_POINTS, LEFT_BEHIND, POINTS, Child, finish, preload
from tests.vendors.forked_steps import start as forked
from tests.vendors.replicate import _child
from tests.vendors.replicate.support import expected_cost

preload("tests.vendors.replicate._child")


@pytest.fixture(scope="module")
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(api_token="r8_crashmatrix0000000000", seconds_to_finish=0.0) as running:
        yield running


def start(api: ReplicateApi, store: Path, eid: str, **options: Any) -> Child:
    spec = {"store": str(store), "episode": eid, "base_url": api.url, **options}
    return forked(_child.run, spec, store, REPLICATE_TEST_TOKEN=api.api_token)


@pytest.mark.parametrize("point", POINTS)
def test_crash_then_retry_bills_one_prediction(api: ReplicateApi, tmp_path: Path, point: str) -> None:
    store_path = tmp_path / "store"
    store = open_store(store_path)
    eid = store.allocate("2026-W32", f"crash:{point}").episode_id
    token = idempotency_token(store.identity, eid)

    if point == "in_flight":
        api.configure(fault="slow", fault_times=1, slow_seconds=30.0)
        first = start(api, store_path, eid)
        deadline = time.monotonic() + 30
        while api.accepted(token) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        first.kill(signal.SIGKILL)  # the create answer is still held by the API
    else:
        first = start(api, store_path, eid, kill=point)
    code, _, err = finish(first)
    assert code == -signal.SIGKILL, err
    assert api.accepted(token) == (1 if point in ACCEPTED_POINTS else 0)
    original = api.predictions_for(token)
    assert store.get(eid).submission.state is LEFT_BEHIND[point]

    code, out, err = finish(start(api, store_path, eid, poll=True))
    assert code == 0, err
    assert out["state"] == "succeeded"
    assert out["cost"] == pytest.approx(expected_cost(2.5), rel=1e-12)
    final = api.predictions_for(token)
    assert len(final) == 1, f"the API holds {final} for one episode"
    assert out["remote_ref"] == final[0]
    if original:
        assert final == original, "the retry must end on the original prediction"
