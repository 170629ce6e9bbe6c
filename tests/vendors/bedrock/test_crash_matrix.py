"""The crash matrix for both Bedrock providers (async invoke, batch inference): SIGKILL a real process at
each point, retry in a fresh one.

Each cell (a fresh store and episode; one double per API for the module): the first process dies at its
point (``in_flight`` is killed from outside while the double holds back the answer to an invocation
it already made); a fresh process then retries, resending the episode's clientRequestToken, and
polls to the end. The double must hold at most one job for the token, the retry must end on the
original one when there is one, and the episode's estimate must be the invocation's price (the
batch's: its manifest's tokens, priced).
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
from airflow_idempotent_jobs.testing.bedrock_api import BedrockRuntimeApi
from airflow_idempotent_jobs.testing.bedrock_control_api import BedrockControlApi
from airflow_idempotent_jobs.vendors.bedrock import batch_request_token, client_request_token
from tests.vendors.bedrock import _child
from tests.vendors.bedrock.batch_support import JOB
from tests.vendors.bedrock.batch_support import PRICES as BATCH_PRICES
from tests.vendors.bedrock.support import PRICES, START
from tests.vendors.forked_steps import ACCEPTED_POINTS, LEFT_BEHIND, POINTS, Child, finish, preload
from tests.vendors.forked_steps import start as forked

PRICE = PRICES[START["modelId"]]["per_second"] * START["modelInput"]["videoGenerationConfig"]["durationSeconds"]

preload("tests.vendors.bedrock._child")

TOKENS = 40_000, 8_000  # the batch double's manifest: input, output tokens
BATCH_COST = (
    TOKENS[0] * BATCH_PRICES[JOB["modelId"]]["input"] + TOKENS[1] * BATCH_PRICES[JOB["modelId"]]["output"]
) / 1e6
Double = BedrockRuntimeApi | BedrockControlApi


@pytest.fixture(scope="module", params=["async_invoke", "batch_inference"])
def api(request: pytest.FixtureRequest) -> Iterator[Double]:
    if request.param == "async_invoke":
        with BedrockRuntimeApi(polls_to_finish=1) as runtime:
            yield runtime
    else:
        with BedrockControlApi(polls_to_finish=1, input_tokens=TOKENS[0], output_tokens=TOKENS[1]) as control:
            yield control


def is_batch(api: Double) -> bool:
    return isinstance(api, BedrockControlApi)


def start(api: Double, store: Path, eid: str, **options: Any) -> Child:
    kind = "batch_inference" if is_batch(api) else "async_invoke"
    spec = {"store": str(store), "episode": eid, "url": api.url, "api": kind, **options}
    return forked(_child.run, spec, store)


def jobs(api: Double, token: str) -> list[str]:
    made = api.stats()["jobs" if is_batch(api) else "invocations"]
    return [arn for arn, job in made.items() if job.get("clientRequestToken") == token]


@pytest.mark.parametrize("point", POINTS)
def test_crash_then_retry_bills_one_job(api: Double, tmp_path: Path, point: str) -> None:
    store_path = tmp_path / "store"
    store = open_store(store_path)
    eid = store.allocate("2026-W32", f"crash:{point}").episode_id
    token = idempotency_token(store.identity, eid)
    ours = batch_request_token(token) if is_batch(api) else client_request_token(token)

    if point == "in_flight":
        api.configure(fault="hang_after_accept", fault_times=1, slow_seconds=60.0)
        first = start(api, store_path, eid)
        deadline = time.monotonic() + 60
        while api.accepted(ours) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        first.kill(signal.SIGKILL)  # the answer is still held by the double
    else:
        first = start(api, store_path, eid, kill=point)
    code, _, err = finish(first, timeout=90)
    api.configure(fault=None)
    assert code == -signal.SIGKILL, err
    assert api.accepted(ours) == (1 if point in ACCEPTED_POINTS else 0)
    original = jobs(api, ours)
    assert store.get(eid).submission.state is LEFT_BEHIND[point]

    code, out, err = finish(start(api, store_path, eid, poll=True), timeout=90)
    assert code == 0, err
    assert out["state"] == "succeeded"
    if is_batch(api):
        assert out["estimated_cost"] == _child.BATCH_ESTIMATE
        assert out["cost"] == pytest.approx(BATCH_COST, rel=1e-12)
    else:
        assert out["estimated_cost"] == pytest.approx(PRICE, rel=1e-12)
    final = jobs(api, ours)
    assert len(final) == 1 and api.accepted(ours) == 1, f"the double holds {final} for one episode"
    assert out["remote_ref"] == final[0]
    if original:
        assert final == original, "the retry must end on the original job"
