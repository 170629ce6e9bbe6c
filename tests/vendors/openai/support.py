"""What the OpenAI adapter's tests share: prices, requests, the provider against the local double, and the
cost a batch must have, computed here from the double's documented usage rule (not from the adapter's code)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors.openai import OpenAIBatchProvider

API_KEY = "sk-test-0penai-9f3c2a71d5e8"
MODEL = "gpt-5-mini"
PRICES: dict[str, dict[str, float]] = {
    MODEL: {"input": 0.125, "output": 1.0, "cached_input": 0.0125},
    "text-embedding-3-small": {"input": 0.01, "output": 0.0},
}


def chat_request(count: int = 3, **extra: Any) -> dict[str, Any]:
    requests = [
        {
            "custom_id": f"q{index}",
            "body": {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"question {index}: " + "é" * (10 * index)}],
                "max_tokens": 40 + index,
            },
        }
        for index in range(count)
    ]
    return {"requests": requests, **extra}


def provider(api: OpenAIApi, **options: Any) -> OpenAIBatchProvider:
    options.setdefault("timeout", 2.0)
    return OpenAIBatchProvider(prices=PRICES, api_key=api.api_key, base_url=api.base_url, **options)


def download(api: OpenAIApi, file_id: str) -> bytes:
    """A file's bytes, read over plain HTTP (not through the adapter)."""
    answer = httpx.get(f"{api.base_url}/files/{file_id}/content", headers={"Authorization": f"Bearer {api.api_key}"})
    answer.raise_for_status()
    return answer.content


def expected_tokens(body: dict[str, Any], endpoint: str = "/v1/chat/completions") -> tuple[int, int, int]:
    """(uncached input, cached input, output) tokens of one answered request, by the double's rule."""
    sent = body["messages"] if endpoint == "/v1/chat/completions" else body["input"]
    prompt = len(json.dumps(sent, separators=(",", ":"), ensure_ascii=False).encode()) // 4 + 1
    if endpoint == "/v1/embeddings":
        return prompt, 0, 0
    limit = body.get("max_tokens") or body.get("max_completion_tokens") or body.get("max_output_tokens") or 0
    return prompt - prompt // 4, prompt // 4, (limit + 1) // 2


def expected_cost(bodies: list[dict[str, Any]], endpoint: str = "/v1/chat/completions") -> float:
    total = 0.0
    for body in bodies:
        price = PRICES[body["model"]]
        fresh, cached, output = expected_tokens(body, endpoint)
        cached_price = price.get("cached_input", price["input"])
        total += (fresh * price["input"] + cached * cached_price + output * price["output"]) / 1_000_000
    return total


def usage_in(content: bytes) -> dict[str, int]:
    """The tokens an output file reports, summed (prompt, cached, completion), read here line by line."""
    sums = {"prompt": 0, "cached": 0, "completion": 0}
    for line in content.splitlines():
        usage = json.loads(line)["response"]["body"]["usage"]
        sums["prompt"] += usage.get("prompt_tokens", usage.get("input_tokens", 0))
        sums["completion"] += usage.get("completion_tokens", usage.get("output_tokens", 0))
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        sums["cached"] += details.get("cached_tokens", 0)
    return sums
