"""The crash matrix: SIGKILL a real process at each point of a submission, retry in a fresh one.

For every provider and each capability it really has, the API must hold at most one paid job per
episode; (a) and (b) end with the original job, (c) refuses until ``idempotent-jobs reconcile``
settles it. Providers: the HTTP provider ((a), (b), (c) by server switches); a custom provider
(``test_custom_provider.JobClientProvider``: its own client, no `HttpProviderConfig`; the same three);
and the two example adapters (`example_adapters`): prediction style and batch style, each with (b),
lookup by listing, and (c), the listing switched off. The batch style takes two calls per job, and is also killed
between them (after the free upload, before the paid batch call): the upload may repeat, the batch never.

Every paid step is a real OS process forked by one `Zygote` per module (imports paid once); each
cell's API server is a thread of this process.
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.paid import idempotency_token
from airflow_idempotent_jobs.testing.server import ProviderServer
from example_adapters.batch_api import BatchApi
from example_adapters.prediction_api import PredictionApi
from tests.paid.support import (
    CAPABILITIES,
    CHILD_OK,
    CHILD_UNKNOWN,
    ForkedChild,
    Zygote,
    finish,
    jobs_for,
    run_cli,
    wait_until,
)

#: Where the first process dies; ``in_flight`` is killed from outside once the server has accepted.
POINTS = ["before_intent", "after_intent", "in_flight", "after_answer", "after_saved"]
#: The batch style's extra point: the upload answered, the paid batch call not made.
BATCH_POINTS = [*POINTS[:2], "between_calls", *POINTS[2:]]
#: Points after which the provider certainly holds the job.
ACCEPTED_POINTS = {"in_flight", "after_answer", "after_saved"}
#: What the crashed process left in the ledger.
LEFT_BEHIND = {
    "before_intent": SubmissionState.NONE,
    "after_intent": SubmissionState.SUBMITTING,
    "between_calls": SubmissionState.SUBMITTING,
    "in_flight": SubmissionState.SUBMITTING,
    "after_answer": SubmissionState.SUBMITTING,
    "after_saved": SubmissionState.ACCEPTED,
}
#: The adapters' capabilities: (b) the API lists jobs by metadata token, (c) it does not.
ADAPTER_CAPABILITIES = {"b-lookup": True, "c-neither": False}


@dataclass
class Api:
    """One provider under test: its server (a thread of this process) and a child that pays through it."""

    server: Any
    start: Callable[..., ForkedChild]
    jobs_for: Callable[[str], list[str]]


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    with Zygote(tmp_path_factory.mktemp("children")) as running:
        yield running


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_crash_then_retry_never_pays_twice(zygote: Zygote, tmp_path: Path, capability: str, point: str) -> None:
    """The HTTP provider."""
    with ProviderServer(polls_to_finish=1, **CAPABILITIES[capability]) as server:
        start = functools.partial(zygote.start_child, server)
        crash_then_retry(Api(server, start, functools.partial(jobs_for, server)), tmp_path, capability, point)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_custom_provider_crash_then_retry_never_pays_twice(
    zygote: Zygote, tmp_path: Path, capability: str, point: str
) -> None:
    switches = CAPABILITIES[capability]
    with ProviderServer(auth_token="custom-provider-token-8d4", polls_to_finish=1, **switches) as server:
        tokens, lookup = switches["honour_tokens"], switches["lookup"]
        start = functools.partial(zygote.start_adapter_child, server, "custom", lookup=lookup, tokens=tokens)
        crash_then_retry(Api(server, start, functools.partial(jobs_for, server)), tmp_path, capability, point)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("capability", list(ADAPTER_CAPABILITIES))
def test_prediction_style_crash_then_retry_never_pays_twice(
    zygote: Zygote, tmp_path: Path, capability: str, point: str
) -> None:
    lookup = ADAPTER_CAPABILITIES[capability]
    with PredictionApi(auth_token="prediction-api-token-5e1", polls_to_finish=1, lookup=lookup) as server:
        start = functools.partial(zygote.start_adapter_child, server, "prediction", lookup=lookup)
        crash_then_retry(Api(server, start, server.jobs_for), tmp_path, capability, point)


@pytest.mark.parametrize("point", BATCH_POINTS)
@pytest.mark.parametrize("capability", list(ADAPTER_CAPABILITIES))
def test_batch_style_crash_then_retry_never_pays_twice(
    zygote: Zygote, tmp_path: Path, capability: str, point: str
) -> None:
    lookup = ADAPTER_CAPABILITIES[capability]
    with BatchApi(auth_token="batch-api-token-7c2", polls_to_finish=1, lookup=lookup) as server:
        start = functools.partial(zygote.start_adapter_child, server, "batch", lookup=lookup)
        api = Api(server, start, server.jobs_for)
        token = crash_then_retry(api, tmp_path, capability, point)
        # Killed between the calls, the first upload is an orphan and the retry uploads again (free);
        # everywhere else one upload: a retry that finds the batch adopts it and uploads nothing.
        assert server.uploads_named(f"{token}.json") == (2 if point == "between_calls" else 1)


def crash_then_retry(api: Api, tmp_path: Path, capability: str, point: str) -> str:
    """Kill a paid step at ``point``, retry it in a fresh process (and reconcile for (c)); returns the token."""
    server = api.server
    store_path = tmp_path / "store"
    store = open_store(store_path)
    episode = store.allocate("2026-W32", f"crash:{capability}:{point}")
    eid = episode.episode_id
    token = idempotency_token(store.identity, eid)

    # -- the crash ---------------------------------------------------------------------------------
    if point == "in_flight":
        server.configure(fault="slow", fault_times=1, slow_seconds=30)
        first = api.start(store_path, eid)
        wait_until(lambda: server.accepted(token) == 1, what="the server to accept the job")
        first.send_signal(signal.SIGKILL)  # the answer is still held by the server
    else:
        first = api.start(store_path, eid, kill=point)
    code, _, err = finish(first)
    assert code == -signal.SIGKILL, err
    assert server.accepted(token) == (1 if point in ACCEPTED_POINTS else 0)
    original = api.jobs_for(token)
    left = store.get(eid).submission
    assert left.state is LEFT_BEHIND[point]
    if point == "after_saved":
        assert [left.remote_ref] == original

    # -- the retry, in a fresh process ----------------------------------------------------------------
    code, out, err = finish(api.start(store_path, eid, poll=True))
    uncertain = capability == "c-neither" and LEFT_BEHIND[point] is SubmissionState.SUBMITTING
    if uncertain:
        assert code == CHILD_UNKNOWN, err
        assert "idempotent-jobs reconcile" in out["message"]
        assert server.accepted(token) == len(original)  # nothing new was sent...
        assert store.get(eid).submission.state is LEFT_BEHIND[point]  # ...and nothing changed
        code, out, err = finish(api.start(store_path, eid, poll=True))
        assert code == CHILD_UNKNOWN, "still refused until an operator settles it"
        # -- the operator settles it; the retry resumes (or submits exactly once) -------------------
        word = ["--remote-ref", original[0]] if original else ["--not-submitted"]
        done = run_cli("--store", str(store_path), "reconcile", eid, *word, "--by", "oncall")
        assert done.returncode == 0, done.stderr
        settled = store.get(eid).submission
        assert settled.settled_by == "oncall" and settled.settled_at
        code, out, err = finish(api.start(store_path, eid, poll=True))
    assert code == CHILD_OK, err
    assert out["state"] == "succeeded"
    assert out["cost"] == 2.5
    final = api.jobs_for(token)
    assert len(final) == 1, f"the provider holds {final} for one episode"
    if original:
        assert out["remote_ref"] == original[0], "the retry must end on the original job"
    assert out["remote_ref"] == final[0]
    assert server.accepted() == 1
    return token
