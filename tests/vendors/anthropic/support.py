"""What the Anthropic batch tests share: prices, sample requests, the expected cost by the server's usage rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchProvider
from airflow_idempotent_jobs.vendors.anthropic._requests import tag_for

if TYPE_CHECKING:
    from airflow_idempotent_jobs.testing.anthropic_api import AnthropicApi

MODEL = "claude-test-1"
#: Batch prices per million tokens (cache writes and reads priced apart from plain input).
PRICES: dict[str, Any] = {MODEL: {"input": 1.5, "output": 7.5, "cached_input": 0.15, "cache_write": 1.875}}
SYSTEM = "answer in one short sentence"


def request(*questions: str, max_tokens: int = 40, system: str | None = SYSTEM) -> dict[str, Any]:
    """A batch of one request per question, custom_ids ``q0``, ``q1``, ..."""
    requests = []
    for index, question in enumerate(questions):
        params: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": question}],
        }
        if system is not None:
            params["system"] = system
        requests.append({"custom_id": f"q{index}", "params": params})
    return {"requests": requests}


REQUEST = request("what is a lighthouse", "why is the sea salty")


def expected_cost(batch: Mapping[str, Any]) -> float:
    """The cost by the server's documented usage rule, computed here on its own (all requests succeed)."""
    price = PRICES[MODEL]
    total = 0.0
    systems: set[str] = set()
    for one in batch["requests"]:
        params = one["params"]
        words = sum(len(m["content"].split()) for m in params["messages"])
        system = params.get("system")
        cached = len(system.split()) if system else 0
        write = cached if system and system not in systems else 0
        read = cached - write
        if system:
            systems.add(system)
        output = min(params["max_tokens"], words + 5)
        total += (words + 3) * price["input"] + output * price["output"]
        total += write * price["cache_write"] + read * price["cached_input"]
    return total / 1_000_000


def provider(api: AnthropicApi, base_url: str | None = None, **options: Any) -> AnthropicBatchProvider:
    """The provider on the real SDK, pointed at ``base_url`` (default: the local API)."""
    options.setdefault("timeout", 2.0)
    return AnthropicBatchProvider(api_key=api.api_key, base_url=base_url or api.url, prices=PRICES, **options)


def tag(token: str) -> str:
    """The server counts batches by this tag (``ij`` + 20 hex digits), as the provider makes it."""
    return tag_for(token)[:-1]
