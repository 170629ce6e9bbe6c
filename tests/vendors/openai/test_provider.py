"""`OpenAIBatchProvider` with the real ``openai`` SDK against the local double of the Batch API.

The cost is checked against the output file read over plain HTTP and against the double's usage
rule computed here; bad requests are refused with nothing sent (the double's counters say so).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any

import openai
import pytest

from airflow_idempotent_jobs.errors import (
    InvalidConfiguration,
    InvalidRequest,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors.openai import TOKEN_KEY, prepare_request
from tests.vendors.openai.support import (
    API_KEY,
    MODEL,
    chat_request,
    download,
    expected_cost,
    provider,
    usage_in,
)


def nothing_sent(api: OpenAIApi) -> bool:
    stats = api.stats()
    return bool(stats["uploads"] == 0 and stats["submissions"] == 0)


def test_a_batch_is_uploaded_created_polled_and_costed_from_its_output(api: OpenAIApi) -> None:
    api.configure(polls_to_finish=3)
    adapter, request = provider(api), chat_request(3, metadata={"team": "growth"})
    ref = adapter.submit(request, "tok-happy")
    stats = api.stats()
    assert (stats["uploads"], stats["submissions"], stats["accepted"]) == (1, 1, 1)
    assert stats["batches"][ref]["metadata"] == {"team": "growth", TOKEN_KEY: "tok-happy"}
    states = [adapter.status(ref).state for _ in range(3)]
    assert states == [RemoteState.RUNNING, RemoteState.RUNNING, RemoteState.SUCCEEDED]
    done = adapter.status(ref)
    output = download(api, done.result["output_file_id"])
    seen = usage_in(output)  # the output, read here
    bodies = [entry["body"] for entry in request["requests"]]
    by_hand = (
        (seen["prompt"] - seen["cached"]) * 0.125 + seen["cached"] * 0.0125 + seen["completion"] * 1.0
    ) / 1_000_000
    assert done.cost == pytest.approx(by_hand) == pytest.approx(expected_cost(bodies))
    assert done.result["request_counts"] == {"total": 3, "completed": 3, "failed": 0}
    assert done.result["usage"][MODEL]["cached_input_tokens"] == seen["cached"] > 0
    assert "choices" not in json.dumps(done.result)  # the outputs themselves stay out of the record
    sink = io.BytesIO()
    assert adapter.stream_output(ref, sink) == len(output) and sink.getvalue() == output
    assert adapter.stream_output(ref, io.BytesIO(), errors=True) == 0  # no error file


def test_a_prepared_jsonl_file_is_sent_as_it_was_hashed(api: OpenAIApi, tmp_path: Path) -> None:
    bodies = [{"model": MODEL, "input": f"summarise week {n}", "max_output_tokens": 64} for n in range(4)]
    lines = [{"custom_id": f"w{n}", "method": "POST", "url": "/v1/responses", "body": b} for n, b in enumerate(bodies)]
    path = tmp_path / "week.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    request = prepare_request({"endpoint": "/v1/responses", "input_file": {"path": str(path)}})
    assert request["input_file"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    adapter = provider(api)
    ref = adapter.submit(request, "tok-file")
    batch = api.stats()["batches"][ref]
    with api.lock:
        assert api.files[batch["input_file_id"]]["_content"] == path.read_bytes()
    done = adapter.status(ref)
    assert done.state is RemoteState.SUCCEEDED
    assert done.cost == pytest.approx(expected_cost(bodies, "/v1/responses"))

    path.write_bytes(path.read_bytes().replace(b"week 3", b"week 9"))  # changed after it was prepared
    with pytest.raises(ProviderUnavailable, match="changed since prepare_request"):
        adapter.submit(request, "tok-changed")
    assert api.stats()["uploads"] == 1 and api.accepted() == 1
    with pytest.raises(ProviderRejected, match="no sha256"):
        adapter.submit({"endpoint": "/v1/responses", "input_file": {"path": str(path)}}, "tok-unprepared")


def with_request(change: dict[str, Any], index: int = 0) -> dict[str, Any]:
    request = chat_request(2)
    request["requests"][index] = {**request["requests"][index], **change}
    return request


BAD: list[tuple[str, Any, str]] = [
    ("not an object", ["x"], "request: must be an object"),
    ("unknown field", {**chat_request(1), "model": MODEL}, "model: is not a field"),
    ("endpoint", chat_request(1, endpoint="/v1/images"), "endpoint:"),
    ("window", chat_request(1, completion_window="1h"), "completion_window:"),
    ("both forms", {**chat_request(1), "input_file": {"path": "/x"}}, "either requests"),
    ("no requests", {"requests": []}, "requests: must be a non-empty list"),
    ("custom_id empty", with_request({"custom_id": " "}), r"requests\[0\].custom_id: must be a non-empty string"),
    ("custom_id twice", with_request({"custom_id": "q0"}, 1), r"requests\[1\].custom_id: 'q0' is used twice"),
    ("body", with_request({"body": "hello"}), r"requests\[0\].body: must be an object"),
    ("model", with_request({"body": {"messages": []}}), r"requests\[0\].body.model"),
    ("max_tokens", with_request({"body": {"model": MODEL, "max_tokens": True}}), "max_tokens: True is not a whole"),
    ("NaN", with_request({"body": {"model": MODEL, "temperature": math.nan}}), "has no JSON form"),
    ("extra field", with_request({"url": "/v1/x"}), r"requests\[0\].url: is not a field"),
    ("metadata type", chat_request(1, metadata=["a"]), "metadata: must map names to strings"),
    ("metadata value", chat_request(1, metadata={"n": 7}), "metadata.n: must be a string"),
    ("metadata long key", chat_request(1, metadata={"k" * 65: "v"}), "1 to 64 characters"),
    ("metadata 16 pairs", chat_request(1, metadata={f"k{i}": "v" for i in range(16)}), "has 16 pairs"),
    ("our key", chat_request(1, metadata={TOKEN_KEY: "mine"}), "the adapter's own key"),
    ("input_file", {"input_file": {"path": "/nonexistent/week.jsonl", "sha256": "0" * 64}}, "cannot read"),
    ("sha256", {"input_file": {"path": "/x", "sha256": "XYZ"}}, "64 lowercase hex"),
]


@pytest.mark.parametrize(("request_", "message"), [(r, m) for _, r, m in BAD], ids=[name for name, _, _ in BAD])
def test_a_bad_request_is_refused_before_anything_is_sent(api: OpenAIApi, request_: Any, message: str) -> None:
    adapter = provider(api)
    with pytest.raises(InvalidRequest, match=message):
        adapter.validate(request_)
    with pytest.raises(ProviderRejected, match=message):
        adapter.submit(request_, "tok-bad")
    assert nothing_sent(api)


def test_a_model_without_prices_fails_before_sending(api: OpenAIApi) -> None:
    request = with_request({"body": {"model": "gpt-unpriced", "max_tokens": 5}}, 1)
    with pytest.raises(InvalidConfiguration, match="'gpt-unpriced' is not in the price table"):
        provider(api).worst_case(request)
    with pytest.raises(ProviderRejected, match="gpt-unpriced"):
        provider(api).submit(request, "tok-unpriced")
    assert nothing_sent(api)


def test_the_worst_case_bounds_every_line_as_sent_and_needs_a_max_tokens(api: OpenAIApi) -> None:
    adapter, request = provider(api), chat_request(3)
    worst = adapter.worst_case(request)
    ref = adapter.submit(request, "tok-worst")
    with api.lock:
        sent = api.files[api.batches[ref]["input_file_id"]]["_content"].splitlines(keepends=True)
    by_hand = sum(len(line) * 0.125 + (40 + n) * 1.0 for n, line in enumerate(sent)) / 1_000_000
    assert worst == pytest.approx(by_hand)
    assert 0 < (adapter.status(ref).cost or 0) < worst
    unbounded = with_request({"body": {"model": MODEL, "messages": []}}, 2 - 1)
    with pytest.raises(InvalidRequest, match=r"requests\[1\].body: has no max_completion_tokens or max_tokens"):
        adapter.worst_case(unbounded)
    embeddings = {
        "endpoint": "/v1/embeddings",
        "requests": [{"custom_id": "e", "body": {"model": MODEL, "input": "x"}}],
    }
    assert adapter.worst_case(embeddings) > 0  # embeddings have no output to bound


@pytest.mark.parametrize(
    ("switches", "state", "completed", "said"),
    [
        ({"end_as": "expired", "done_lines": 1}, RemoteState.FAILED, 1, "ended expired: 1 of 3 requests completed, 2"),
        ({"end_as": "completed", "failed_lines": 1}, RemoteState.SUCCEEDED, 2, None),
        ({"end_as": "failed"}, RemoteState.FAILED, 0, "ended failed: 0 of 0 requests completed"),
    ],
    ids=["expired", "partly-failed", "failed"],
)
def test_an_ended_batch_costs_its_completed_lines(
    api: OpenAIApi, switches: dict[str, Any], state: RemoteState, completed: int, said: str | None
) -> None:
    api.configure(**switches)
    adapter, request = provider(api), chat_request(3)
    ended = adapter.status(adapter.submit(request, "tok-ended"))
    assert ended.state is state and ended.result["request_counts"]["completed"] == completed
    assert ended.cost == pytest.approx(expected_cost([r["body"] for r in request["requests"][:completed]]))
    assert (ended.error is None) if said is None else (said in str(ended.error))


def test_a_cancelled_batch_is_failed_and_still_bills_what_ran(api: OpenAIApi) -> None:
    api.configure(polls_to_finish=5, done_lines=2)
    adapter, request = provider(api), chat_request(4)
    ref = adapter.submit(request, "tok-cancel")
    openai.OpenAI(api_key=API_KEY, base_url=api.base_url).batches.cancel(ref)
    assert adapter.status(ref).state is RemoteState.FAILED
    ended = adapter.status(ref)
    assert "ended cancelled: 2 of 4" in str(ended.error)
    assert ended.cost == pytest.approx(expected_cost([r["body"] for r in request["requests"][:2]]))
    errors = io.BytesIO()
    adapter.stream_output(ref, errors, errors=True)
    assert [json.loads(line)["error"]["code"] for line in errors.getvalue().splitlines()] == ["batch_cancelled"] * 2


def test_a_snapshot_model_is_priced_by_its_alias_and_an_unknown_one_is_an_anomaly(api: OpenAIApi) -> None:
    api.configure(model_suffix="-2025-08-07")
    adapter, request = provider(api), chat_request(2)
    dated = adapter.status(adapter.submit(request, "tok-dated"))
    assert dated.cost == pytest.approx(expected_cost([r["body"] for r in request["requests"]]))
    api.configure(model_suffix="-turbo")
    other = adapter.status(adapter.submit(request, "tok-other"))
    assert other.state is RemoteState.SUCCEEDED and other.cost is not None and math.isnan(other.cost)
    assert "no price for gpt-5-mini-turbo" in other.result["cost_problem"]


def test_the_api_key_never_leaves_in_an_error(api: OpenAIApi) -> None:
    api.configure(echo_token=True, fault="400", fault_times=1)
    adapter = provider(api)
    with pytest.raises(ProviderRejected) as refused:
        adapter.submit(chat_request(1), "tok-echo")
    with pytest.raises(ProviderRejected) as missing:
        adapter.status("batch_does_not_exist")
    for error in (refused.value, missing.value):
        assert "not valid" in str(error)  # the echo is there...
        assert API_KEY not in str(error) and "9f3c2a71d5e8" not in str(error)  # ...without the key
    assert adapter.redact(f"key {API_KEY} or Bearer%20{API_KEY}") == "key <redacted> or <redacted>"


def test_a_status_that_keeps_failing_is_unknown_after_the_sdks_read_retries(api: OpenAIApi) -> None:
    adapter = provider(api)
    ref = adapter.submit(chat_request(1), "tok-read")
    api.configure(status_errors=[503, 503, 503])
    with pytest.raises(ProviderOutcomeUnknown, match="HTTP 503"):
        adapter.status(ref)  # the SDK's two retries of a read, then the truth: unknown
    assert api.stats()["status_calls"] == 3
