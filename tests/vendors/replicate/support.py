"""What the Replicate tests share: prices, sample requests, the provider on the real SDK at the local API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_idempotent_jobs.vendors.replicate import ReplicatePredictionProvider

if TYPE_CHECKING:
    from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi

MODEL = "acme/video-maker"
VERSION = "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa"
#: The hardware's price per second of predict time (an A100's, say), a flat part, and the cap sent as Cancel-After.
PRICES: dict[str, Any] = {
    MODEL: {"per_second": 0.0014, "per_prediction": 0.01, "max_seconds": 600},
    VERSION: {"per_second": 0.000225},
}
REQUEST: dict[str, Any] = {"model": MODEL, "input": {"prompt": "a lighthouse at dusk, slow pan", "seconds": 5}}
VERSION_REQUEST: dict[str, Any] = {"version": f"acme/hello:{VERSION}", "input": {"text": "Alice"}}


def expected_cost(predict_time: float, key: str = MODEL) -> float:
    """The cost by the table, computed here on its own."""
    price = PRICES[key]
    return float(price.get("per_prediction", 0.0)) + float(price["per_second"]) * predict_time


def provider(api: ReplicateApi, base_url: str | None = None, **options: Any) -> ReplicatePredictionProvider:
    """The provider on the real SDK, pointed at ``base_url`` (default: the local API)."""
    options.setdefault("timeout", 2.0)
    options.setdefault("prices", PRICES)
    return ReplicatePredictionProvider(api_token=api.api_token, base_url=base_url or api.url, **options)
